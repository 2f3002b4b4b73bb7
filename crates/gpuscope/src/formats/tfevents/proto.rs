//! The subset of TensorFlow's `Event` protobuf that TensorBoard event files use, written out
//! by hand as `prost::Message` structs.
//!
//! Why by hand: `protoc` is not on the build machines, so `prost-build` cannot run; the
//! subset is small and stable (field numbers from tensorflow/core/util/event.proto,
//! summary.proto, tensor.proto, tensor_shape.proto and tensorboard's custom_scalar
//! layout.proto). Fields gpuscope never reads or writes are left out; prost skips unknown
//! fields when decoding, so files carrying them still parse.

// Field-by-field mirrors of the .proto files; the .proto comments are the documentation.
#![allow(missing_docs)]

/// tensorflow.Event
#[derive(Clone, PartialEq, prost::Message)]
pub struct Event {
    #[prost(double, tag = "1")]
    pub wall_time: f64,
    #[prost(int64, tag = "2")]
    pub step: i64,
    #[prost(oneof = "What", tags = "3, 4, 5, 6, 7, 8, 9")]
    pub what: Option<What>,
}

/// The `what` oneof of tensorflow.Event.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum What {
    #[prost(string, tag = "3")]
    FileVersion(String),
    #[prost(bytes, tag = "4")]
    GraphDef(Vec<u8>),
    #[prost(message, tag = "5")]
    Summary(Summary),
    #[prost(bytes, tag = "6")]
    LogMessage(Vec<u8>),
    #[prost(bytes, tag = "7")]
    SessionLog(Vec<u8>),
    #[prost(bytes, tag = "8")]
    TaggedRunMetadata(Vec<u8>),
    #[prost(bytes, tag = "9")]
    MetaGraphDef(Vec<u8>),
}

/// tensorflow.Summary
#[derive(Clone, PartialEq, prost::Message)]
pub struct Summary {
    #[prost(message, repeated, tag = "1")]
    pub value: Vec<SummaryValue>,
}

/// tensorflow.Summary.Value
#[derive(Clone, PartialEq, prost::Message)]
pub struct SummaryValue {
    #[prost(string, tag = "7")]
    pub node_name: String,
    #[prost(string, tag = "1")]
    pub tag: String,
    #[prost(message, optional, tag = "9")]
    pub metadata: Option<SummaryMetadata>,
    #[prost(oneof = "ValueKind", tags = "2, 3, 4, 5, 6, 8")]
    pub value: Option<ValueKind>,
}

/// The `value` oneof of tensorflow.Summary.Value.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum ValueKind {
    #[prost(float, tag = "2")]
    SimpleValue(f32),
    #[prost(bytes, tag = "3")]
    ObsoleteOldStyleHistogram(Vec<u8>),
    #[prost(bytes, tag = "4")]
    Image(Vec<u8>),
    #[prost(message, tag = "5")]
    Histo(HistogramProto),
    #[prost(bytes, tag = "6")]
    Audio(Vec<u8>),
    #[prost(message, tag = "8")]
    Tensor(TensorProto),
}

/// tensorflow.SummaryMetadata
#[derive(Clone, PartialEq, prost::Message)]
pub struct SummaryMetadata {
    #[prost(message, optional, tag = "1")]
    pub plugin_data: Option<PluginData>,
    #[prost(string, tag = "2")]
    pub display_name: String,
    #[prost(string, tag = "3")]
    pub summary_description: String,
    /// tensorflow.DataClass: 0 unknown, 1 scalar, 2 tensor, 3 blob sequence.
    #[prost(int32, tag = "4")]
    pub data_class: i32,
}

/// tensorflow.SummaryMetadata.PluginData
#[derive(Clone, PartialEq, prost::Message)]
pub struct PluginData {
    #[prost(string, tag = "1")]
    pub plugin_name: String,
    #[prost(bytes, tag = "2")]
    pub content: Vec<u8>,
}

/// tensorflow.HistogramProto
#[derive(Clone, PartialEq, prost::Message)]
pub struct HistogramProto {
    #[prost(double, tag = "1")]
    pub min: f64,
    #[prost(double, tag = "2")]
    pub max: f64,
    #[prost(double, tag = "3")]
    pub num: f64,
    #[prost(double, tag = "4")]
    pub sum: f64,
    #[prost(double, tag = "5")]
    pub sum_squares: f64,
    #[prost(double, repeated, tag = "6")]
    pub bucket_limit: Vec<f64>,
    #[prost(double, repeated, tag = "7")]
    pub bucket: Vec<f64>,
}

/// tensorflow.TensorProto (numeric and string values only)
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorProto {
    /// tensorflow.DataType; see [`dtype`].
    #[prost(int32, tag = "1")]
    pub dtype: i32,
    #[prost(message, optional, tag = "2")]
    pub tensor_shape: Option<TensorShapeProto>,
    #[prost(bytes = "vec", tag = "4")]
    pub tensor_content: Vec<u8>,
    #[prost(float, repeated, tag = "5")]
    pub float_val: Vec<f32>,
    #[prost(double, repeated, tag = "6")]
    pub double_val: Vec<f64>,
    #[prost(int32, repeated, tag = "7")]
    pub int_val: Vec<i32>,
    #[prost(bytes = "vec", repeated, tag = "8")]
    pub string_val: Vec<Vec<u8>>,
    #[prost(int64, repeated, tag = "10")]
    pub int64_val: Vec<i64>,
    #[prost(bool, repeated, tag = "11")]
    pub bool_val: Vec<bool>,
    #[prost(int32, repeated, tag = "13")]
    pub half_val: Vec<i32>,
}

/// tensorflow.TensorShapeProto
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorShapeProto {
    #[prost(message, repeated, tag = "2")]
    pub dim: Vec<TensorShapeDim>,
    #[prost(bool, tag = "3")]
    pub unknown_rank: bool,
}

/// tensorflow.TensorShapeProto.Dim
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorShapeDim {
    #[prost(int64, tag = "1")]
    pub size: i64,
    #[prost(string, tag = "2")]
    pub name: String,
}

/// tensorboard.Layout (custom scalars plugin)
#[derive(Clone, PartialEq, prost::Message)]
pub struct Layout {
    #[prost(int32, tag = "1")]
    pub version: i32,
    #[prost(message, repeated, tag = "2")]
    pub category: Vec<Category>,
}

/// tensorboard.Category
#[derive(Clone, PartialEq, prost::Message)]
pub struct Category {
    #[prost(string, tag = "1")]
    pub title: String,
    #[prost(message, repeated, tag = "2")]
    pub chart: Vec<Chart>,
    #[prost(bool, tag = "3")]
    pub closed: bool,
}

/// tensorboard.Chart
#[derive(Clone, PartialEq, prost::Message)]
pub struct Chart {
    #[prost(string, tag = "1")]
    pub title: String,
    #[prost(message, optional, tag = "2")]
    pub multiline: Option<MultilineChartContent>,
    #[prost(message, optional, tag = "3")]
    pub margin: Option<MarginChartContent>,
}

/// tensorboard.MarginChartContent
#[derive(Clone, PartialEq, prost::Message)]
pub struct MarginChartContent {
    #[prost(message, repeated, tag = "1")]
    pub series: Vec<MarginSeries>,
}

/// tensorboard.MarginChartContent.Series
#[derive(Clone, PartialEq, prost::Message)]
pub struct MarginSeries {
    #[prost(string, tag = "1")]
    pub value: String,
    #[prost(string, tag = "2")]
    pub lower: String,
    #[prost(string, tag = "3")]
    pub upper: String,
}

/// tensorboard.MultilineChartContent: regular expressions over tags.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MultilineChartContent {
    #[prost(string, repeated, tag = "1")]
    pub tag: Vec<String>,
}

/// tensorflow.DataType values gpuscope reads.
pub mod dtype {
    pub const FLOAT: i32 = 1;
    pub const DOUBLE: i32 = 2;
    pub const INT32: i32 = 3;
    pub const UINT8: i32 = 4;
    pub const INT16: i32 = 5;
    pub const INT8: i32 = 6;
    pub const STRING: i32 = 7;
    pub const INT64: i32 = 9;
    pub const BOOL: i32 = 10;
    pub const HALF: i32 = 19;
}

/// tensorflow.DataClass value for scalar summaries.
pub const DATA_CLASS_SCALAR: i32 = 1;
