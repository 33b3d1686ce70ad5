//! The `clusterset-dns` binary: flags, logging, sockets, signals; everything else is in the library.

use std::io::IsTerminal;
use std::process::ExitCode;

use clusterset_dns::cli::{Args, LogFormat, LogLevel, Run};
use clusterset_dns::server::{Listeners, Shutdown};
use tracing::{error, info};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::prelude::*;

fn init_logging(format: LogFormat, level: LogLevel) {
    let level = match level {
        LogLevel::Error => LevelFilter::ERROR,
        LogLevel::Warn => LevelFilter::WARN,
        LogLevel::Info => LevelFilter::INFO,
        LogLevel::Debug => LevelFilter::DEBUG,
        LogLevel::Trace => LevelFilter::TRACE,
    };
    // Our own lines at the chosen level; libraries' (hickory logs every request at debug) from warn up.
    let filter = Targets::new()
        .with_target("clusterset_dns", level)
        .with_default(level.min(LevelFilter::WARN));
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(std::io::stderr),
            )
            .init(),
        // Colours only for a person at a terminal: a pipe, a file or a container's log (what
        // `kubectl logs` shows) gets plain `key=value` text. NO_COLOR (no-color.org) turns
        // them off at a terminal too.
        LogFormat::Text => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(
                        std::io::stderr().is_terminal()
                            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
                    )
                    .with_writer(std::io::stderr),
            )
            .init(),
    }
}

fn main() -> ExitCode {
    clusterset_dns::sys::one_malloc_arena();
    let args = match <Args as clap::Parser>::try_parse_from(std::env::args_os()) {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            // One line naming what is wrong, not clap's usage block.
            let text = e.render().to_string();
            let line = text.lines().next().unwrap_or("invalid arguments");
            eprintln!("clusterset-dns: {}", line.trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    init_logging(args.log().log_format, args.log().log_level);
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        clusterset_dns::metrics::PANICS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        default_hook(info);
    }));
    let config = match args.run() {
        Ok(Run::Serve(config)) => *config,
        Ok(Run::Zone { input, timeout }) => return print_zone(&input, timeout),
        Ok(Run::Bridge(bridge)) => return run_bridge(*bridge),
        Err(e) => {
            eprintln!("clusterset-dns: {e}");
            return ExitCode::from(2);
        }
    };
    let listeners = match Listeners::bind(&config.server) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("clusterset-dns: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match runtime(tokio::runtime::Builder::new_multi_thread()) {
        Ok(r) => r,
        Err(code) => return code,
    };
    runtime.block_on(async {
        info!(
            version = clusterset_dns::metrics::VERSION,
            revision = clusterset_dns::metrics::REVISION,
            listen = %config.server.listen,
            udp_workers = config.server.udp.workers,
            admin_listen = %config.server.admin,
            ?config,
            "starting"
        );
        let shutdown = Shutdown::new();
        let signals = shutdown.clone();
        tokio::spawn(async move {
            let Some(mut incoming) = Signals::new() else {
                return;
            };
            // The first signal starts the lame duck; a second one (Ctrl-C twice) stops at once.
            for first in [true, false] {
                let name = incoming.next().await;
                if first {
                    info!(signal = name, "shutting down");
                    signals.begin();
                } else {
                    info!(signal = name, "second signal: exiting at once");
                    signals.now();
                }
            }
        });
        match clusterset_dns::run(config, listeners, shutdown).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                error!("{e:#}");
                eprintln!("clusterset-dns: {e:#}");
                ExitCode::FAILURE
            }
        }
    })
}

/// SIGTERM and SIGINT, as they come. Must be made inside the runtime.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    /// None (and logged) when the process cannot listen for them.
    fn new() -> Option<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(term), Ok(int)) => Some(Signals { term, int }),
            _ => {
                error!("cannot listen for SIGTERM/SIGINT");
                None
            }
        }
    }

    /// The name of the next signal.
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}

fn runtime(mut builder: tokio::runtime::Builder) -> Result<tokio::runtime::Runtime, ExitCode> {
    builder.enable_all().build().map_err(|e| {
        eprintln!("clusterset-dns: cannot start the runtime: {e}");
        ExitCode::FAILURE
    })
}

/// `clusterset-dns linkerd-bridge`: runs until SIGTERM or SIGINT.
fn run_bridge(config: clusterset_dns::bridge::Config) -> ExitCode {
    // Two threads: one may deserialize a watch's events or walk the stores for the gauges
    // while the other works through the keys.
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(2);
    let runtime = match runtime(builder) {
        Ok(r) => r,
        Err(code) => return code,
    };
    runtime.block_on(async {
        let shutdown = tokio_util::sync::CancellationToken::new();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let Some(mut signals) = Signals::new() else {
                return;
            };
            let name = signals.next().await;
            info!(signal = name, "shutting down");
            stop.cancel();
        });
        match clusterset_dns::bridge::run(config, shutdown).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                error!("{e}");
                eprintln!("clusterset-dns: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

/// `clusterset-dns zone`: prints the zone and exits.
fn print_zone(config: &clusterset_dns::Input, wait: std::time::Duration) -> ExitCode {
    let runtime = match runtime(tokio::runtime::Builder::new_current_thread()) {
        Ok(r) => r,
        Err(code) => return code,
    };
    match runtime.block_on(clusterset_dns::zone_text(config, wait)) {
        Ok(text) => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                Ok(()) => ExitCode::SUCCESS,
                // A closed pipe (`| head`) is not worth a message.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("clusterset-dns: cannot write the zone: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(e) => {
            eprintln!("clusterset-dns: {e:#}");
            ExitCode::FAILURE
        }
    }
}
