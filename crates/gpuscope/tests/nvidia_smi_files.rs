//! The shared nvidia-smi outputs (real machines: drivers 390, 440 in Docker, 450 with the
//! MIG column, an A100 `-q -x` with MIG on, an exporter's `--query-gpu` CSV) read by the
//! parsers. Expected figures were read off the files by eye, not from this code's output.

use crate::common;

use common::shared_data;
use gpuscope::formats::gpu::nvidia_smi::parse_saved;
use gpuscope::model::gpu::{GpuSample, MIB};
use gpuscope::render::monitor::line_text;

fn read(name: &str) -> Vec<GpuSample> {
    let path = shared_data(&format!("nvidia-smi/{name}"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    parse_saved(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn mib(n: u64) -> Option<u64> {
    Some(n * MIB)
}

#[test]
fn driver390_eight_gtx1080ti_with_thirteen_processes() {
    let gpus = read("nvidia-htop__FAKE_STDIN__driver390_8xGTX1080Ti.txt");
    assert_eq!(gpus.len(), 8);
    let g0 = &gpus[0];
    assert_eq!(g0.name, "GeForce GTX 108...");
    assert_eq!(g0.temperature_c, Some(75.0));
    assert_eq!(g0.power_w, Some(223.0));
    assert_eq!(g0.power_limit_w, Some(250.0));
    assert_eq!(g0.memory_used_bytes, mib(10807));
    assert_eq!(g0.memory_total_bytes, mib(11178));
    assert_eq!(g0.utilization_percent, Some(98.0));
    let g7 = &gpus[7];
    assert_eq!(
        (
            g7.index,
            g7.temperature_c,
            g7.power_w,
            g7.memory_used_bytes,
            g7.utilization_percent
        ),
        (7, Some(69.0), Some(249.0), mib(7773), Some(47.0))
    );
    let processes: usize = gpus.iter().map(|g| g.processes.len()).sum();
    assert_eq!(processes, 13);
    let matlab = &gpus[3].processes[0];
    assert_eq!(matlab.pid, 4755);
    assert_eq!(
        matlab.name.as_deref(),
        Some("...ware/MATLAB/matlab94/bin/glnxa64/MATLAB")
    );
    assert_eq!(matlab.used_memory_bytes, mib(389));
    assert_eq!(gpus[4].processes.len(), 4);
    assert_eq!(gpus[6].processes[1].name.as_deref(), Some("python3.5"));
    assert_eq!(gpus[6].processes[1].used_memory_bytes, mib(577));
}

#[test]
fn driver440_in_docker_lists_no_processes() {
    let gpus = read("nvidia-htop__FAKE_STDIN_NO_PROCESSES_DOCKER__driver440.txt");
    assert_eq!(gpus.len(), 2);
    assert_eq!(gpus[0].memory_used_bytes, mib(10916));
    assert_eq!(gpus[0].memory_total_bytes, mib(11175));
    assert_eq!(gpus[0].utilization_percent, Some(59.0));
    assert_eq!(gpus[0].power_w, Some(73.0));
    assert_eq!(gpus[1].temperature_c, Some(29.0));
    assert_eq!(gpus[1].memory_used_bytes, mib(149));
    assert!(gpus.iter().all(|g| g.processes.is_empty()));
}

#[test]
fn driver450_with_the_mig_column() {
    let gpus = read("nvidia-htop__FAKE_STDIN_NEW_FORMAT__driver450_RTX2070.txt");
    assert_eq!(gpus.len(), 2);
    assert_eq!(gpus[0].name, "GeForce RTX 2070");
    assert_eq!(gpus[1].name, "GeForce GTX 750 Ti");
    assert_eq!(gpus[0].memory_used_bytes, mib(749));
    assert_eq!(gpus[0].memory_total_bytes, mib(7981));
    assert_eq!(gpus[1].power_w, Some(1.0));
    assert_eq!(gpus[1].power_limit_w, Some(46.0));
    assert_eq!(gpus[0].processes.len(), 1);
    assert_eq!(gpus[0].processes[0].pid, 1032);
    assert_eq!(gpus[0].processes[0].used_memory_bytes, mib(745));
    let pids: Vec<u32> = gpus[1].processes.iter().map(|p| p.pid).collect();
    assert_eq!(pids, [11021, 25544, 4755, 14518, 13956]);
    assert_eq!(gpus[1].processes[4].used_memory_bytes, mib(472));
    assert_eq!(
        gpus[1].processes[2].name.as_deref(),
        Some("...matlab94/bin/glnxa64/MATLAB")
    );
}

#[test]
fn a100_xml_with_mig_and_na_fields() {
    let gpus = read("netdata__a100-sxm4-mig.xml");
    assert_eq!(gpus.len(), 1);
    let a100 = &gpus[0];
    assert_eq!(a100.name, "NVIDIA A100-SXM4-40GB");
    assert_eq!(
        a100.uuid.as_deref(),
        Some("GPU-27b94a00-ed54-5c24-b1fd-1054085de32a")
    );
    // The device's own fb_memory_usage, not a MIG instance's (19 MiB of 19968).
    assert_eq!(a100.memory_used_bytes, mib(38));
    assert_eq!(a100.memory_total_bytes, mib(40960));
    assert_eq!(
        a100.utilization_percent, None,
        "gpu_util is N/A with MIG on"
    );
    assert_eq!(a100.temperature_c, Some(36.0));
    assert_eq!(a100.power_w, Some(66.92));
    assert_eq!(a100.power_limit_w, Some(400.0));
    assert!(a100.processes.is_empty());
}

/// Driver 580's `-q -x` (an H200): power under `gpu_power_readings` as
/// `average_power_draw` and `current_power_limit`, read as the same moment's
/// `--query-gpu=power.draw,power.limit` CSV gives them (taken a second apart).
#[test]
fn driver580_xml_power_is_its_average_draw_and_current_limit() {
    let path = shared_data("gpu-h200/nvidia-smi/h200_driver580_busy_q.xml");
    let gpus = parse_saved(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let csv = shared_data("gpu-h200/nvidia-smi/h200_driver580_busy_query.csv");
    let query = parse_saved(&std::fs::read_to_string(&csv).unwrap()).unwrap();
    assert_eq!(gpus[0].power_w, Some(228.56));
    assert_eq!(gpus[0].power_limit_w, query[0].power_limit_w);
    let (xml, csv) = (gpus[0].power_w.unwrap(), query[0].power_w.unwrap());
    assert!((xml - csv).abs() < 5.0, "{xml} vs {csv}");
}

#[test]
fn exporter_csv_with_its_own_columns_and_na() {
    let gpus = read("nvidia_gpu_exporter__query.csv.txt");
    assert_eq!(gpus.len(), 2);
    assert_eq!(gpus[0].name, "NVIDIA GeForce RTX 2080 SUPER");
    assert_eq!(
        gpus[0].uuid.as_deref(),
        Some("GPU-df6e7a7c-7314-46f8-abc4-b88b36dcf3aa")
    );
    assert_eq!(gpus[0].memory_used_bytes, mib(575));
    assert_eq!(gpus[1].index, 1);
    assert_eq!(gpus[1].memory_used_bytes, mib(1234));
    // The exporter did not ask for the total, utilisation or power: unknown, not 0.
    assert_eq!(gpus[1].memory_total_bytes, None);
    assert_eq!(gpus[1].memory_percent(), None);
    assert_eq!(gpus[1].utilization_percent, None);
    assert_eq!(gpus[1].power_w, None);
}

#[test]
fn the_line_text_of_a_real_table_is_a_line_per_gpu() {
    let gpus = read("nvidia-htop__FAKE_STDIN_NEW_FORMAT__driver450_RTX2070.txt");
    let sample = gpuscope::model::gpu::Sample {
        gpus,
        ..Default::default()
    };
    // 749 / 7981 MiB = 0.73 / 7.79 GB (9 %); 871 / 2002 MiB = 0.85 / 1.96 GB (44 %).
    assert!(line_text(&sample).starts_with(
        "GPU0 Memory: 0.7 GB / 7.8 GB (9%), 2% util, 50°C, 27 W\n\
         GPU1 Memory: 0.9 GB / 2.0 GB (44%), 0% util, 30°C, 1 W\nHost RAM"
    ));
    // Eight GPUs: nine lines (the host's last), each within 80 columns.
    let sample = gpuscope::model::gpu::Sample {
        gpus: read("nvidia-htop__FAKE_STDIN__driver390_8xGTX1080Ti.txt"),
        ..Default::default()
    };
    let text = line_text(&sample);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 9, "{text}");
    assert!(
        lines[7].starts_with("GPU7 Memory: 7.6 GB / 10.9 GB (70%)"),
        "{text}"
    );
    assert!(lines[8].starts_with("Host RAM"), "{text}");
    assert!(lines.iter().all(|l| l.chars().count() <= 80), "{text}");
}

#[test]
fn every_cut_of_every_file_is_refused_or_read_without_panic() {
    let dir = shared_data("nvidia-smi");
    for entry in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for cut in (0..text.len())
            .filter(|c| text.is_char_boundary(*c))
            .step_by(7)
        {
            let _ = parse_saved(&text[..cut]);
        }
    }
}

/// A saved table cut off anywhere before its end (a paste that stopped short, a log
/// truncated by a full disk) is refused with the reason, never read as fewer GPUs or
/// processes than the machine had.
#[test]
fn a_table_cut_off_is_refused_not_read_as_fewer_gpus() {
    let name = "nvidia-htop__FAKE_STDIN__driver390_8xGTX1080Ti.txt";
    let text = std::fs::read_to_string(shared_data(&format!("nvidia-smi/{name}"))).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let after = |needle: &str| lines.iter().position(|l| l.starts_with(needle)).unwrap();
    // Line 10 is the rule below GPU 0; line 8 is GPU 0's first line.
    assert!(lines[9].starts_with('+') && lines[7].starts_with("|   0  GeForce"));
    for (keep, said) in [
        (
            10,
            "ends among its GPU boxes, after 1 whole GPU: the output is cut off",
        ),
        (
            8,
            "ends among its GPU boxes, after 0 whole GPUs: the output is cut off",
        ),
        (
            12,
            "ends among its GPU boxes, after 1 whole GPU: the output is cut off",
        ),
        (
            after("|    6     27159"),
            "the Processes box has no closing rule: the output is cut off",
        ),
    ] {
        let cut = lines[..keep].join("\n") + "\n";
        let err = parse_saved(&cut).expect_err(&format!("cut after line {keep}"));
        assert!(err.contains(said), "cut after line {keep}: {err}");
    }
    // The whole file ends with the Processes box's closing rule and no newline.
    assert_eq!(parse_saved(&text).unwrap().len(), 8);
}

#[test]
fn one_gpu_with_every_figure_and_a_command_keeps_to_80_columns() {
    // The A100's XML has memory, temperature and power; with the host's CPU and RAM and
    // the command `gpuscope run` samples, one line would run past 80 columns.
    let sample = gpuscope::model::gpu::Sample {
        gpus: read("netdata__a100-sxm4-mig.xml"),
        host: gpuscope::model::gpu::HostSample {
            cpu_percent: Some(24.0),
            ram_used_bytes: Some(503 * MIB),
            ram_total_bytes: Some(24064 * MIB),
        },
        tree: Some(gpuscope::model::gpu::TreeSample {
            root_pid: 7,
            pids: vec![7, 8],
            rss_bytes: Some(900 * MIB),
            cpu_percent: Some(99.0),
            gpu_memory_bytes: Some(4096 * MIB),
            ..Default::default()
        }),
        ..Default::default()
    };
    let text = line_text(&sample);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("GPU Memory: 0.0 GB / 40.0 GB (0%), 36°C, 67 W"),
        "{text}"
    );
    assert!(lines.iter().any(|l| l.contains("Host CPU 24%")), "{text}");
    assert!(
        lines.last().unwrap().contains("Command: 2 processes"),
        "{text}"
    );
    assert!(lines.iter().all(|l| l.chars().count() <= 80), "{text}");
    // Every part is whole on one line: none is cut.
    assert_eq!(
        text.replace('\n', " | ").matches(" | ").count(),
        2,
        "{text}"
    );
}
