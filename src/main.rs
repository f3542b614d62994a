//! The `mcpload` binary: parses the command line and hands over to the library.

mod cli;
mod cli_auth;

use clap::Parser;

/// glibc's allocator serialises threads on its arena locks under this allocation pattern
/// (many small, short-lived buffers freed on another thread); mimalloc does not.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    raise_open_files_limit();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcpload: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli.command.run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpload: {e:#}");
            // 2: the configuration or the command line could not be used.
            let usage = matches!(
                e.downcast_ref::<mcpload::server::ServeError>(),
                Some(
                    mcpload::server::ServeError::Config(_)
                        | mcpload::server::ServeError::Bind { .. }
                )
            ) || e.downcast_ref::<cli::UsageError>().is_some();
            let interrupted = e.downcast_ref::<cli::Interrupted>().is_some();
            ExitCode::from(if interrupted {
                130
            } else if usage {
                2
            } else {
                1
            })
        }
    }
}

/// Every socket is an open file: a run of 10,000 virtual users needs 10,000 sockets (and a
/// built-in or hostile server in the same process, or a `mcpload serve`, as many again), far
/// past the soft limit of 1,024 open files many systems start a shell with. So every
/// subcommand (`run`, `serve`, …) raises the soft limit to the hard one before it starts, as
/// far as the system lets (a failure leaves it as it was).
#[cfg(target_os = "linux")]
fn raise_open_files_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if let (Some(current), Some(maximum)) = (limit.current, limit.maximum)
        && current < maximum
    {
        let raised = rustix::process::Rlimit {
            current: Some(maximum),
            maximum: Some(maximum),
        };
        let _ = setrlimit(Resource::Nofile, raised);
    }
}

#[cfg(not(target_os = "linux"))]
fn raise_open_files_limit() {}
