//! The `mcpload` binary: parses the command line and hands over to the library.

mod cli;

use clap::Parser;

/// glibc's allocator serialises threads on its arena locks under this allocation pattern
/// (many small, short-lived buffers freed on another thread); mimalloc does not.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
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
