//! `ksmith mcp`: KernelSmith's judge, tuner, searches and store as tools of a Model Context
//! Protocol server (docs/mcp.md), on the official Rust SDK (`rmcp`), over stdio (the default)
//! or streamable HTTP on a loopback port (`--http 127.0.0.1:PORT`).
//!
//! The tools call the same functions as the subcommands (`eval`, `eval A B`, `validate`,
//! `tune`, `runs`, `evals`, `show`, `report`) and answer with the documents those print with
//! `--json`. A candidate that arrives as text is staged in a private directory and judged like
//! any other: untrusted. Optimize runs and searches are long: each runs as its own `ksmith
//! optimize` / `ksmith resume` process (so stopping one is the terminal's Ctrl-C, its run lock
//! is its own, and nothing it prints reaches the protocol's stdout), its engine events written
//! as JSON lines that the server turns into progress notifications.

mod input;
pub(crate) mod runs;
mod server;

use crate::{env_err, input as input_err, Ctx, Exit};
use anyhow::{anyhow, Context};
use std::net::SocketAddr;

/// Arguments of `ksmith mcp`.
#[derive(clap::Args)]
pub(crate) struct McpArgs {
    /// Serve streamable HTTP on this loopback address (e.g. 127.0.0.1:8765) instead of stdio.
    #[arg(long, value_name = "ADDR:PORT")]
    http: Option<SocketAddr>,
}

/// `ksmith mcp`.
pub(crate) fn run(ctx: &Ctx, args: &McpArgs) -> Result<u8, Exit> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
        .map_err(env_err)?;
    let state = server::Shared::new(ctx.clone());
    match args.http {
        None => {
            // The protocol owns the real stdout; everything else that would print there (a
            // stray line, a child process that inherits descriptor 1) goes to stderr instead.
            let out = protocol_stdout().map_err(env_err)?;
            rt.block_on(server::serve_stdio(state, out))
                .map_err(env_err)?;
        }
        Some(addr) => {
            if !addr.ip().is_loopback() {
                return Err(input_err(anyhow!(
                    "--http {addr}: the server has no authentication; bind a loopback address (127.0.0.1 or [::1])"
                )));
            }
            rt.block_on(server::serve_http(state, addr))
                .map_err(env_err)?;
        }
    }
    // Runs started from here go on (they are resumable processes of their own).
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    Ok(0)
}

/// A duplicate of stdout for the protocol, with descriptor 1 then pointed at stderr.
fn protocol_stdout() -> anyhow::Result<tokio::fs::File> {
    use std::os::fd::AsFd;
    let stdout = std::io::stdout();
    let dup = stdout
        .as_fd()
        .try_clone_to_owned()
        .context("duplicating stdout")?;
    nix::unistd::dup2(2, 1).context("pointing stdout at stderr")?;
    Ok(tokio::fs::File::from_std(std::fs::File::from(dup)))
}
