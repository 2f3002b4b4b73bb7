//! Builds the protobuf events gpuscope writes, in the encodings TensorBoard and
//! `torch.utils.tensorboard` use, so every reader of event files understands them.

use prost::Message;

use super::proto::{self, dtype, What};
use crate::model::tensorboard::{Chart, ChartContent, ChartGroup, Histogram};

/// The version string TensorBoard expects in the first record of an event file.
pub const FILE_VERSION: &str = "brain.Event:2";
/// The tag TensorBoard's custom-scalars plugin reads its layout from.
pub const CUSTOM_SCALARS_TAG: &str = "custom_scalars__config__";

/// The first event of every file.
pub fn file_version(wall_time: f64) -> proto::Event {
    proto::Event {
        wall_time,
        step: 0,
        what: Some(What::FileVersion(FILE_VERSION.to_owned())),
    }
}

/// A scalar as `simple_value` (32-bit, as TensorBoard stores scalars).
pub fn scalar(tag: &str, value: f64, step: i64, wall_time: f64) -> proto::Event {
    summary(
        step,
        wall_time,
        proto::SummaryValue {
            tag: tag.to_owned(),
            value: Some(proto::ValueKind::SimpleValue(value as f32)),
            ..Default::default()
        },
    )
}

/// A scalar as a rank-0 tensor of the scalars plugin (SummaryWriter's `new_style=True`),
/// in float64 when `double` is set.
pub fn scalar_tensor(
    tag: &str,
    value: f64,
    double: bool,
    step: i64,
    wall_time: f64,
) -> proto::Event {
    let tensor = if double {
        proto::TensorProto {
            dtype: dtype::DOUBLE,
            double_val: vec![value],
            tensor_shape: Some(proto::TensorShapeProto::default()),
            ..Default::default()
        }
    } else {
        proto::TensorProto {
            dtype: dtype::FLOAT,
            float_val: vec![value as f32],
            tensor_shape: Some(proto::TensorShapeProto::default()),
            ..Default::default()
        }
    };
    let mut event = plugin_tensor(tag, "scalars", tensor, step, wall_time);
    if let Some(What::Summary(summary)) = &mut event.what {
        if let Some(metadata) = summary.value[0].metadata.as_mut() {
            metadata.data_class = proto::DATA_CLASS_SCALAR;
        }
    }
    event
}

/// A text summary for the text plugin: a string tensor of shape `[1]`.
pub fn text(tag: &str, text: &str, step: i64, wall_time: f64) -> proto::Event {
    let tensor = proto::TensorProto {
        dtype: dtype::STRING,
        tensor_shape: Some(proto::TensorShapeProto {
            dim: vec![proto::TensorShapeDim {
                size: 1,
                name: String::new(),
            }],
            unknown_rank: false,
        }),
        string_val: vec![text.as_bytes().to_vec()],
        ..Default::default()
    };
    plugin_tensor(tag, "text", tensor, step, wall_time)
}

/// A histogram summary.
pub fn histogram(tag: &str, h: &Histogram, step: i64, wall_time: f64) -> proto::Event {
    let histo = proto::HistogramProto {
        min: h.min,
        max: h.max,
        num: h.num,
        sum: h.sum,
        sum_squares: h.sum_squares,
        bucket_limit: h.bucket_limit.clone(),
        bucket: h.bucket.clone(),
    };
    summary(
        step,
        wall_time,
        proto::SummaryValue {
            tag: tag.to_owned(),
            value: Some(proto::ValueKind::Histo(histo)),
            ..Default::default()
        },
    )
}

/// The custom-scalars layout: charts that each plot every tag matching their patterns.
pub fn custom_scalars_layout(groups: &[ChartGroup], wall_time: f64) -> proto::Event {
    let layout = proto::Layout {
        version: 0,
        category: groups
            .iter()
            .map(|g| proto::Category {
                title: g.title.clone(),
                chart: g.charts.iter().map(chart).collect(),
                closed: false,
            })
            .collect(),
    };
    let tensor = proto::TensorProto {
        dtype: dtype::STRING,
        tensor_shape: Some(proto::TensorShapeProto::default()),
        string_val: vec![layout.encode_to_vec()],
        ..Default::default()
    };
    plugin_tensor(CUSTOM_SCALARS_TAG, "custom_scalars", tensor, 0, wall_time)
}

fn chart(c: &Chart) -> proto::Chart {
    let (multiline, margin) = match &c.content {
        ChartContent::Multiline(patterns) => (
            Some(proto::MultilineChartContent {
                tag: patterns.clone(),
            }),
            None,
        ),
        ChartContent::Margin(series) => (
            None,
            Some(proto::MarginChartContent {
                series: series
                    .iter()
                    .map(|s| proto::MarginSeries {
                        value: s.value.clone(),
                        lower: s.lower.clone(),
                        upper: s.upper.clone(),
                    })
                    .collect(),
            }),
        ),
    };
    proto::Chart {
        title: c.title.clone(),
        multiline,
        margin,
    }
}

fn plugin_tensor(
    tag: &str,
    plugin: &str,
    tensor: proto::TensorProto,
    step: i64,
    wall_time: f64,
) -> proto::Event {
    let metadata = proto::SummaryMetadata {
        plugin_data: Some(proto::PluginData {
            plugin_name: plugin.to_owned(),
            content: Vec::new(),
        }),
        ..Default::default()
    };
    summary(
        step,
        wall_time,
        proto::SummaryValue {
            tag: tag.to_owned(),
            metadata: Some(metadata),
            value: Some(proto::ValueKind::Tensor(tensor)),
            ..Default::default()
        },
    )
}

fn summary(step: i64, wall_time: f64, value: proto::SummaryValue) -> proto::Event {
    proto::Event {
        wall_time,
        step,
        what: Some(What::Summary(proto::Summary { value: vec![value] })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::tfevents::decode::decode_event;
    use crate::model::tensorboard::{EventBody, MarginSeries, ValueData};

    fn round_trip(e: proto::Event) -> crate::model::tensorboard::Event {
        decode_event(&e.encode_to_vec()).unwrap()
    }

    #[test]
    fn every_kind_decodes_to_what_was_written() {
        let e = round_trip(scalar("Loss/total", 0.25, 7, 1.5));
        assert_eq!((e.step, e.wall_time), (7, 1.5));
        let EventBody::Summary(values) = e.body else {
            panic!("not a summary")
        };
        assert_eq!(values[0].tag, "Loss/total");
        assert_eq!(values[0].data, ValueData::Scalar(0.25));

        for double in [false, true] {
            let e = round_trip(scalar_tensor("t", 0.1, double, 2, 0.0));
            let EventBody::Summary(values) = e.body else {
                panic!()
            };
            let expected = if double { 0.1 } else { f64::from(0.1f32) };
            assert_eq!(values[0].data, ValueData::Scalar(expected));
        }

        let e = round_trip(text("notes", "héllo", 3, 0.0));
        let EventBody::Summary(values) = e.body else {
            panic!()
        };
        assert_eq!(values[0].data, ValueData::Text("héllo".into()));

        let groups = vec![ChartGroup {
            title: "Loss".into(),
            charts: vec![
                Chart {
                    title: "components".into(),
                    content: ChartContent::Multiline(vec!["Loss/component_.*".into()]),
                },
                Chart {
                    title: "band".into(),
                    content: ChartContent::Margin(vec![MarginSeries {
                        value: "mean".into(),
                        lower: "lo".into(),
                        upper: "hi".into(),
                    }]),
                },
            ],
        }];
        let e = round_trip(custom_scalars_layout(&groups, 0.0));
        let EventBody::Summary(values) = e.body else {
            panic!()
        };
        assert_eq!(values[0].tag, CUSTOM_SCALARS_TAG);
        assert_eq!(values[0].data, ValueData::CustomScalarsLayout(groups));

        let h = Histogram::from_values(&[1.0, 2.0, 3.0], 2);
        let e = round_trip(histogram("w", &h, 1, 0.0));
        let EventBody::Summary(values) = e.body else {
            panic!()
        };
        assert_eq!(values[0].data, ValueData::Histogram(h));

        let e = round_trip(file_version(9.0));
        assert_eq!(e.body, EventBody::FileVersion(FILE_VERSION.into()));
    }
}
