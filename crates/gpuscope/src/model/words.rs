//! Enums whose variants are words of the output (`"scalar"`, `"kernel"`, `"high"`):
//! [`words!`] declares such an enum with each variant's word written once, and derives from
//! that one table `as_str`, `Display`, `ALL` and a `Serialize` that writes the word. The
//! JSON, the text and the page then cannot spell a kind two ways, and a misspelt kind is a
//! compile error instead of a key that silently matches nothing.
//!
//! The same idea as pydantic-core's `ErrorType` (strum derives its names from one
//! declaration), without the dependency. Enums whose words the text never prints keep
//! `#[derive(Serialize)]` with `rename_all`.

/// Declares `enum Name { Variant = "word", … }` with `Name::ALL` (declaration order),
/// `as_str`, `Display` (which honours width and alignment) and `Serialize` as the word.
/// Derives and documentation are written on the enum and its variants as usual.
macro_rules! words {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$variant_meta:meta])* $variant:ident = $word:literal, )+
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[$variant_meta])* $variant, )+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The word, as the JSON writes it.
            pub const fn as_str(&self) -> &'static str {
                match self {
                    $( $name::$variant => $word, )+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    };
}

pub(crate) use words;

#[cfg(test)]
mod tests {
    words! {
        /// A test enum.
        #[derive(Debug, Clone, Copy, PartialEq)]
        enum Colour {
            /// Red.
            Red = "red",
            /// Dark blue.
            DarkBlue = "dark_blue",
        }
    }

    #[test]
    fn the_word_is_the_json_the_text_and_the_list() {
        assert_eq!(Colour::ALL, &[Colour::Red, Colour::DarkBlue]);
        assert_eq!(Colour::DarkBlue.as_str(), "dark_blue");
        assert_eq!(format!("[{:<5}]", Colour::Red), "[red  ]");
        assert_eq!(
            serde_json::to_string(&Colour::ALL).unwrap(),
            r#"["red","dark_blue"]"#
        );
        let map: std::collections::BTreeMap<&str, Colour> = [("a", Colour::Red)].into();
        assert_eq!(serde_json::to_string(&map).unwrap(), r#"{"a":"red"}"#);
    }
}
