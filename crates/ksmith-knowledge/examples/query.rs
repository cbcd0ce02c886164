//! Try a query against the corpus, to check how a new or edited passage ranks:
//! `cargo run -p ksmith-knowledge --example query -- "bank conflicts" [LIMIT] [DIR...]`
//! (extra directories are added to the built-in corpus, as with `--knowledge DIR`).

use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(query) = args.next() else {
        eprintln!("usage: query QUERY [LIMIT] [DIR...]");
        std::process::exit(2);
    };
    let limit = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let dirs: Vec<PathBuf> = args.map(PathBuf::from).collect();
    let knowledge = match ksmith_knowledge::Knowledge::open(&dirs) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    println!("{} passages", knowledge.len());
    match knowledge.search(&query, limit) {
        Ok(hits) => {
            for p in hits {
                println!(
                    "{:8.3}  {}  ({} chars)",
                    p.score,
                    p.source,
                    p.text.chars().count()
                );
            }
        }
        Err(e) => eprintln!("{e}"),
    }
}
