//! Parsing gcc/clang diagnostics into file/line/column/message.

use crate::Diagnostic;
use regex::Regex;
use std::sync::OnceLock;

/// Extracts `file:line:col: severity: message` lines (gcc and clang share the format).
pub fn parse_diagnostics(log: &str) -> Vec<Diagnostic> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"^(?P<file>[^:\s][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>fatal error|error|warning|note): (?P<msg>.*)$")
            .expect("static regex")
    });
    log.lines()
        .filter_map(|l| {
            let c = re.captures(l)?;
            Some(Diagnostic {
                file: c["file"].to_string(),
                line: c["line"].parse().unwrap_or(0),
                column: c
                    .name("col")
                    .and_then(|m| m.as_str().parse().ok())
                    .unwrap_or(0),
                severity: c["sev"].to_string(),
                message: c["msg"].to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_gcc_and_clang_lines() {
        let log = "kernel.c: In function 'matmul':\nkernel.c:9:5: error: expected ';' before 'for'\n    9 |     for (;;)\nkernel.c:3:1: warning: unused variable 'x' [-Wunused-variable]\n<command-line>: fatal error: x.h: No such file\nsub/k.c:12: error: no column\n";
        let d = parse_diagnostics(log);
        assert_eq!(d.len(), 3);
        assert_eq!(
            (
                d[0].file.as_str(),
                d[0].line,
                d[0].column,
                d[0].severity.as_str()
            ),
            ("kernel.c", 9, 5, "error")
        );
        assert_eq!(d[0].message, "expected ';' before 'for'");
        assert_eq!(d[1].severity, "warning");
        assert_eq!(
            (d[2].file.as_str(), d[2].line, d[2].column),
            ("sub/k.c", 12, 0)
        );
    }
}
