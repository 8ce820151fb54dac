//! `jupyter-mcp-rs`: the distribution's name as a command, so that `uvx jupyter-mcp-rs ...`
//! works as it is. It runs the `jupyter-mcp` installed beside it with the same arguments (on
//! Unix by `exec`, so nothing stays in between).

use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let program = if cfg!(windows) {
        "jupyter-mcp.exe"
    } else {
        "jupyter-mcp"
    };
    let beside = std::env::current_exe().map(|exe| exe.with_file_name(program));
    let binary = match beside {
        Ok(binary) if binary.is_file() => binary,
        _ => {
            eprintln!(
                "jupyter-mcp-rs: no {program} beside this command; reinstall the package \
                 (pip install --force-reinstall jupyter-mcp-rs)"
            );
            return ExitCode::from(127);
        }
    };
    let mut command = Command::new(&binary);
    command.args(std::env::args_os().skip(1));
    run(command, &binary)
}

#[cfg(unix)]
fn run(mut command: Command, binary: &std::path::Path) -> ExitCode {
    use std::os::unix::process::CommandExt as _;
    let error = command.exec();
    eprintln!("jupyter-mcp-rs: cannot run {}: {error}", binary.display());
    ExitCode::from(126)
}

#[cfg(not(unix))]
fn run(mut command: Command, binary: &std::path::Path) -> ExitCode {
    match command.status() {
        Ok(status) => ExitCode::from(u8::try_from(status.code().unwrap_or(1)).unwrap_or(1)),
        Err(error) => {
            eprintln!("jupyter-mcp-rs: cannot run {}: {error}", binary.display());
            ExitCode::from(126)
        }
    }
}
