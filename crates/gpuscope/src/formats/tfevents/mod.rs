//! TensorBoard event files: TFRecord framing, the Event protobuf subset, a background
//! writer with SummaryWriter's conventions, and a streaming reader that also reads files
//! written by TensorFlow, `torch.utils.tensorboard` and tensorboardX.

pub mod decode;
pub mod encode;
pub mod file_writer;
pub mod load;
pub mod proto;
pub mod reader;
pub mod record;
pub mod writer;

pub use file_writer::{EventFileWriter, WriterOptions};
pub use load::{load_log_dir, load_with_histograms, FoundAt, LoadOptions};
pub use reader::{find_event_files, EventFile, EventReader};
pub use writer::EventWriter;
