//! The `toolslot` binary: replay recorded streams, print the catalog, search deferred tools.

use toolslot_actors::front::cli;

use std::process::ExitCode;

use clap::Parser;

/// mimalloc, not glibc's malloc: a call through `toolslot serve` allocates and frees many
/// small buffers on several threads (HTTP, JSON-RPC, the chain), and a profile of the MCP
/// gateway put about 14% of the process's CPU in glibc's allocator (BENCHMARKS.md, "The
/// binary's allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    // Before anything runs: commands and extension programs must not read the keys in
    // toolslot's environment through /proc (the sandbox hides it too, also from root).
    toolslot::sandbox::hide_host_process();
    // Held to the end: dropping it sends the spans still queued for export.
    let _telemetry = cli::init_tracing(&args);
    match cli::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line, no backtrace: the contract promises a reason, never a panic trace.
            eprintln!("toolslot: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
