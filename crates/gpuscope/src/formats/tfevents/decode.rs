//! Turns the protobuf of one record into a [`model::tensorboard::Event`](Event), reducing
//! each summary value to the kind of data it carries, the way TensorBoard's own reader
//! migrates old and new encodings of the same thing (a scalar as `simple_value` or as a
//! rank-0 tensor; text as a string tensor of the text plugin).

use prost::Message;

use super::proto::{self, dtype, ValueKind, What};
use crate::model::tensorboard::{
    Chart, ChartContent, ChartGroup, DataKind, Event, EventBody, EventKind, Histogram,
    MarginSeries, Value, ValueData,
};

/// Decodes one record's bytes; `Err` carries protobuf's reason.
pub fn decode_event(data: &[u8]) -> Result<Event, prost::DecodeError> {
    let event = proto::Event::decode(data)?;
    let body = match event.what {
        None => EventBody::Empty,
        Some(What::FileVersion(v)) => EventBody::FileVersion(v),
        Some(What::Summary(s)) => EventBody::Summary(s.value.into_iter().map(value).collect()),
        Some(What::GraphDef(_)) => EventBody::Other(EventKind::GraphDef),
        Some(What::LogMessage(_)) => EventBody::Other(EventKind::LogMessage),
        Some(What::SessionLog(_)) => EventBody::Other(EventKind::SessionLog),
        Some(What::TaggedRunMetadata(_)) => EventBody::Other(EventKind::TaggedRunMetadata),
        Some(What::MetaGraphDef(_)) => EventBody::Other(EventKind::MetaGraphDef),
    };
    Ok(Event {
        wall_time: event.wall_time,
        step: event.step,
        body,
    })
}

fn value(v: proto::SummaryValue) -> Value {
    let plugin = v
        .metadata
        .as_ref()
        .and_then(|m| m.plugin_data.as_ref())
        .map(|p| p.plugin_name.as_str())
        .unwrap_or("");
    let data = match v.value {
        Some(ValueKind::SimpleValue(x)) => ValueData::Scalar(f64::from(x)),
        Some(ValueKind::Histo(h)) => ValueData::Histogram(histogram(h)),
        Some(ValueKind::Image(_)) => ValueData::Other(DataKind::Image),
        Some(ValueKind::Audio(_)) => ValueData::Other(DataKind::Audio),
        Some(ValueKind::ObsoleteOldStyleHistogram(_)) => {
            ValueData::Other(DataKind::HistogramOldStyle)
        }
        Some(ValueKind::Tensor(t)) => tensor(plugin, t),
        None => ValueData::Other(DataKind::Empty),
    };
    Value { tag: v.tag, data }
}

fn histogram(h: proto::HistogramProto) -> Histogram {
    Histogram {
        min: h.min,
        max: h.max,
        num: h.num,
        sum: h.sum,
        sum_squares: h.sum_squares,
        bucket_limit: h.bucket_limit,
        bucket: h.bucket,
    }
}

fn tensor(plugin: &str, t: proto::TensorProto) -> ValueData {
    match plugin {
        "text" if t.dtype == dtype::STRING => ValueData::Text(
            t.string_val
                .iter()
                .map(|s| String::from_utf8_lossy(s))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        "custom_scalars" => t
            .string_val
            .first()
            .and_then(|bytes| proto::Layout::decode(bytes.as_slice()).ok())
            .map(|layout| ValueData::CustomScalarsLayout(layout_groups(layout)))
            .unwrap_or(ValueData::Other(DataKind::CustomScalars)),
        "histograms" => ValueData::Other(DataKind::HistogramTensor),
        "images" => ValueData::Other(DataKind::Image),
        "audio" => ValueData::Other(DataKind::Audio),
        // The scalars plugin, or an unlabelled tensor holding exactly one number.
        _ => match rank0_number(&t) {
            Some(x) if plugin == "scalars" || plugin.is_empty() => ValueData::Scalar(x),
            _ => ValueData::Other(DataKind::Tensor),
        },
    }
}

/// The single number of a one-element numeric tensor, from whichever field holds it.
fn rank0_number(t: &proto::TensorProto) -> Option<f64> {
    let elements: i64 = t
        .tensor_shape
        .as_ref()
        .map(|s| s.dim.iter().map(|d| d.size).product())
        .unwrap_or(1);
    if elements != 1 {
        return None;
    }
    let content = t.tensor_content.as_slice();
    let from_content = |n: usize| content.get(..n);
    match t.dtype {
        dtype::FLOAT => t.float_val.first().map(|&x| f64::from(x)).or_else(|| {
            from_content(4).map(|b| f64::from(f32::from_le_bytes(b.try_into().expect("4"))))
        }),
        dtype::DOUBLE => t
            .double_val
            .first()
            .copied()
            .or_else(|| from_content(8).map(|b| f64::from_le_bytes(b.try_into().expect("8")))),
        dtype::INT32 | dtype::INT16 | dtype::INT8 | dtype::UINT8 => {
            t.int_val.first().map(|&x| f64::from(x))
        }
        dtype::INT64 => t.int64_val.first().map(|&x| x as f64).or_else(|| {
            from_content(8).map(|b| i64::from_le_bytes(b.try_into().expect("8")) as f64)
        }),
        dtype::BOOL => t.bool_val.first().map(|&b| f64::from(u8::from(b))),
        dtype::HALF => t.half_val.first().map(|&bits| half_to_f64(bits as u16)),
        _ => None,
    }
}

/// IEEE 754 binary16 to f64 (TensorBoard stores `half_val` as the raw 16 bits).
fn half_to_f64(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((bits >> 10) & 0x1f);
    let frac = f64::from(bits & 0x3ff);
    match exp {
        0 => sign * frac * 2f64.powi(-24),
        31 if frac == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        _ => sign * (1.0 + frac / 1024.0) * 2f64.powi(exp - 15),
    }
}

fn layout_groups(layout: proto::Layout) -> Vec<ChartGroup> {
    layout
        .category
        .into_iter()
        .map(|c| ChartGroup {
            title: c.title,
            charts: c
                .chart
                .into_iter()
                .map(|chart| Chart {
                    title: chart.title,
                    content: match (chart.multiline, chart.margin) {
                        (_, Some(margin)) => ChartContent::Margin(
                            margin
                                .series
                                .into_iter()
                                .map(|s| MarginSeries {
                                    value: s.value,
                                    lower: s.lower,
                                    upper: s.upper,
                                })
                                .collect(),
                        ),
                        (multiline, None) => {
                            ChartContent::Multiline(multiline.map(|m| m.tag).unwrap_or_default())
                        }
                    },
                })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_values() {
        assert_eq!(half_to_f64(0x3c00), 1.0);
        assert_eq!(half_to_f64(0xc000), -2.0);
        assert_eq!(half_to_f64(0x3555), 0.333_251_953_125);
        assert_eq!(half_to_f64(0x7c00), f64::INFINITY);
        assert!(half_to_f64(0x7e00).is_nan());
    }

    #[test]
    fn new_style_scalar_tensor_is_a_scalar() {
        let t = proto::TensorProto {
            dtype: dtype::FLOAT,
            float_val: vec![0.5],
            ..Default::default()
        };
        assert_eq!(tensor("scalars", t.clone()), ValueData::Scalar(0.5));
        assert_eq!(tensor("", t), ValueData::Scalar(0.5));
        let content = proto::TensorProto {
            dtype: dtype::DOUBLE,
            tensor_content: 2.25f64.to_le_bytes().to_vec(),
            ..Default::default()
        };
        assert_eq!(tensor("scalars", content), ValueData::Scalar(2.25));
    }
}
