//! Retrieval quality on the built-in corpus, user directories, budgets and errors.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ksmith_knowledge::{Knowledge, KnowledgeError, BUILTIN};

fn builtin() -> &'static Knowledge {
    static K: OnceLock<Knowledge> = OnceLock::new();
    K.get_or_init(|| Knowledge::open(&[]).expect("built-in corpus indexes"))
}

fn docs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/knowledge")
}

/// The first hit of `query` comes from `file`.
#[track_caller]
fn assert_top(query: &str, file: &str) {
    let hits = builtin().search(query, 5).unwrap();
    let sources: Vec<&str> = hits.iter().map(|p| p.source.as_str()).collect();
    assert!(
        hits.first()
            .is_some_and(|p| p.source.starts_with(&format!("{file}#"))),
        "query {query:?}: expected {file} first, got {sources:#?}"
    );
}

#[test]
fn builtin_corpus_matches_docs_directory() {
    let mut on_disk: Vec<String> = std::fs::read_dir(docs_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".md") && n != "README.md")
        .collect();
    on_disk.sort();
    let embedded: Vec<String> = BUILTIN.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(
        embedded, on_disk,
        "BUILTIN in src/lib.rs must list every docs/knowledge/*.md except README.md, sorted"
    );
    for (name, text) in BUILTIN {
        let disk = std::fs::read_to_string(docs_dir().join(name)).unwrap();
        assert_eq!(*text, disk, "{name}: embedded text differs from the file");
    }
    assert!(docs_dir().join("README.md").is_file());
}

#[test]
fn builtin_corpus_is_sizeable_and_well_formed() {
    let k = builtin();
    assert!(k.len() > 80, "only {} passages", k.len());
    for p in k.passages() {
        assert!(p.source.contains(".md#"), "{}", p.source);
        assert!(p.text.starts_with(&p.title), "{}", p.source);
        // Sections were split near the limit (heading line and part marker on top).
        assert!(
            p.text.chars().count() <= ksmith_knowledge::MAX_PASSAGE_CHARS + 200,
            "{} is {} chars",
            p.source,
            p.text.chars().count()
        );
    }
    // Every file contributes passages.
    for (name, _) in BUILTIN {
        assert!(
            k.passages().iter().any(|p| p.source.starts_with(name)),
            "{name} has no passage"
        );
    }
}

#[test]
fn softmax_overflow_finds_stable_reductions() {
    assert_top("softmax overflow max subtraction", "stable-reductions.md");
}

#[test]
fn matmul_tiling_finds_cache_blocking() {
    assert_top("tile matmul L2 cache", "cache-blocking.md");
}

#[test]
fn bank_conflicts_find_cuda() {
    assert_top("bank conflicts shared memory", "cuda.md");
}

#[test]
fn vectorize_restrict_finds_cpu_simd() {
    assert_top("vectorize loop restrict alias", "cpu-simd-avx512.md");
}

#[test]
fn more_topics_find_their_files() {
    assert_top("false sharing per-thread accumulators", "openmp.md");
    assert_top("OpenMP schedule dynamic chunk size", "openmp.md");
    assert_top("welford variance layernorm", "stable-reductions.md");
    assert_top("kahan compensated summation", "stable-reductions.md");
    assert_top("num_warps num_stages", "triton.md");
    assert_top("tl.load mask other", "triton.md");
    assert_top("BlockSpec index_map", "pallas.md");
    assert_top("TPU 128 lanes 8 sublanes block shape", "pallas.md");
    assert_top("warp shuffle reduction __shfl_xor_sync", "cuda.md");
    assert_top(
        "roofline arithmetic intensity memory-bound",
        "cache-blocking.md",
    );
    assert_top("denormals flush to zero", "cpu-simd-avx512.md");
    assert_top("-fopt-info-vec-missed", "cpu-simd-avx512.md");
}

#[test]
fn scans_gathers_and_small_problems_find_their_files() {
    assert_top("prefix sum cumulative scan parallel", "scans.md");
    assert_top("cumsum float32 error tolerance", "scans.md");
    assert_top("exclusive scan inclusive", "scans.md");
    assert_top("decoupled look-back single-pass scan", "scans.md");
    assert_top("tl.cumsum associative_scan", "scans.md");
    assert_top("segmented scan offsets", "scans.md");
    assert_top(
        "scatter-add conflicts atomics duplicate indices",
        "gather-scatter-sort.md",
    );
    assert_top("histogram privatization bins", "gather-scatter-sort.md");
    assert_top(
        "gather prefetch index array latency",
        "gather-scatter-sort.md",
    );
    assert_top("embedding bag lookup", "gather-scatter-sort.md");
    assert_top("top-k nth_element heap", "gather-scatter-sort.md");
    assert_top(
        "radix sort float keys argsort stable",
        "gather-scatter-sort.md",
    );
    assert_top(
        "small rows threading overhead threshold",
        "small-problems.md",
    );
    assert_top(
        "vectorize across rows shorter than SIMD width",
        "small-problems.md",
    );
    assert_top("overhead-bound time flat across sizes", "small-problems.md");
    assert_top(
        "omp parallel if clause threshold num_threads",
        "small-problems.md",
    );
}

#[test]
fn new_files_respect_language_scope() {
    let k = builtin();
    // small-problems.md is C only: found for C, never for CUDA or Triton.
    let query = "small rows threading overhead threshold";
    let c = k.retrieve_for(query, Some("c"), 3, 100_000).unwrap();
    assert!(
        c.first()
            .is_some_and(|p| p.source.starts_with("small-problems.md#")),
        "{:#?}",
        c.iter().map(|p| &p.source).collect::<Vec<_>>()
    );
    for lang in ["cuda", "triton", "pallas"] {
        let hits = k.retrieve_for(query, Some(lang), 5, 100_000).unwrap();
        assert!(
            !hits
                .iter()
                .any(|p| p.source.starts_with("small-problems.md")),
            "{lang}: {:#?}",
            hits.iter().map(|p| &p.source).collect::<Vec<_>>()
        );
    }
    // scans.md and gather-scatter-sort.md apply to every language.
    for lang in ["c", "cuda", "triton", "pallas"] {
        let hits = k
            .retrieve_for("prefix sum cumsum scan", Some(lang), 3, 100_000)
            .unwrap();
        assert!(
            hits.first()
                .is_some_and(|p| p.source.starts_with("scans.md#")),
            "{lang}"
        );
        let hits = k
            .retrieve_for("scatter-add histogram atomics", Some(lang), 3, 100_000)
            .unwrap();
        assert!(
            hits.first()
                .is_some_and(|p| p.source.starts_with("gather-scatter-sort.md#")),
            "{lang}"
        );
    }
    // A plain C query still finds the C-scoped OpenMP notes.
    let hits = k
        .retrieve_for(
            "false sharing per-thread accumulators",
            Some("c"),
            3,
            100_000,
        )
        .unwrap();
    assert!(hits
        .first()
        .is_some_and(|p| p.source.starts_with("openmp.md#")));
}

#[test]
fn results_are_ranked_and_limited() {
    let hits = builtin().search("shared memory tiling", 3).unwrap();
    assert_eq!(hits.len(), 3);
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    assert!(hits.iter().all(|p| p.score > 0.0));
    assert!(builtin().search("shared memory", 0).unwrap().is_empty());
}

#[test]
fn garbage_queries_do_not_error() {
    let k = builtin();
    for q in [
        "",
        "   ",
        "\"unbalanced quote",
        "title:foo body:\"bar",
        "(((softmax",
        "AND",
        "OR NOT AND",
        "softmax AND (max OR",
        "a:b:c -O3 -march=native +x ~2 ^3 [1 TO 5} *",
        "\\ / ? ! { } [ ] ^ ~ * : \" '",
        "über résumé ∑ ∞ 🚀",
        "the and of a",
    ] {
        let hits = k.search(q, 5);
        assert!(hits.is_ok(), "{q:?}: {hits:?}");
        assert!(k.retrieve(q, 5, 1000).is_ok(), "{q:?}");
    }
    // Operators are plain words, punctuation is a separator: these still find things.
    assert!(!k.search("softmax AND (max OR", 5).unwrap().is_empty());
    assert!(!k
        .search("-O3 -march=native restrict", 5)
        .unwrap()
        .is_empty());
}

#[test]
fn retrieve_respects_max_chars() {
    let k = builtin();
    let all = k.search("softmax numerically stable", 8).unwrap();
    assert_eq!(all.len(), 8);
    for budget in [0, 1, 50, 300, 1000, 2500, 4000, 100_000] {
        let got = k.retrieve("softmax numerically stable", 8, budget).unwrap();
        let total: usize = got.iter().map(|p| p.text.chars().count()).sum();
        assert!(total <= budget, "budget {budget}: {total} chars");
        // Same order as search; all but the last are whole.
        for (i, p) in got.iter().enumerate() {
            assert_eq!(p.source, all[i].source);
            if i + 1 < got.len() {
                assert_eq!(p.text, all[i].text);
            } else if p.text != all[i].text {
                // The last one may be cut: at a paragraph end where there is one, else at a
                // line end, and marked as cut.
                let kept = p
                    .text
                    .strip_suffix(&format!("\n{}", ksmith_knowledge::CUT_MARK))
                    .expect("a cut passage is marked");
                assert!(all[i].text.starts_with(kept));
                let rest = &all[i].text[kept.len()..];
                assert!(rest.starts_with('\n'), "cut mid-line");
                // A kept paragraph end means the cut fell at the last one that fit.
                if kept.contains("\n\n") {
                    assert!(rest.starts_with("\n\n"), "cut mid-paragraph: {rest:?}");
                }
            }
        }
    }
    let all_text: usize = all.iter().map(|p| p.text.chars().count()).sum();
    assert_eq!(
        k.retrieve("softmax numerically stable", 8, 100_000)
            .unwrap()
            .len(),
        8
    );
    let tight = k
        .retrieve("softmax numerically stable", 8, all_text - 1)
        .unwrap();
    assert!(tight.len() <= 8);
    assert!(k.retrieve("softmax", 8, 0).unwrap().is_empty());
}

#[test]
fn user_directory_is_searchable() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("sub/deeper")).unwrap();
    std::fs::write(
        dir.path().join("notes.md"),
        "# Team notes\n\n## Zorblax trick\n\nUse the zorblax permutation before the gemm epilogue.\n\n\
         ## Other\n\nNothing to see here.\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("sub/deeper/plain.txt"),
        "A plain text file about quux reductions without headings.\nSecond line.\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("ignored.rs"), "zorblax quux").unwrap();
    std::fs::create_dir_all(dir.path().join(".hidden")).unwrap();
    std::fs::write(dir.path().join(".hidden/secret.md"), "zorblax quux").unwrap();

    let only = Knowledge::from_dirs(&[dir.path().to_path_buf()]).unwrap();
    assert_eq!(only.len(), 3, "{:#?}", only.passages());
    let hits = only.search("zorblax", 5).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].source, "notes.md#Zorblax trick");
    assert_eq!(hits[0].title, "Team notes > Zorblax trick");
    assert!(hits[0].text.contains("zorblax permutation"));
    let hits = only.search("quux", 5).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].source, "sub/deeper/plain.txt");
    assert!(hits[0].text.contains("Second line."));

    // Together with the built-in corpus.
    let both = Knowledge::open(&[dir.path().to_path_buf()]).unwrap();
    assert_eq!(both.len(), builtin().len() + 3);
    assert_eq!(
        both.search("zorblax permutation", 3).unwrap()[0].source,
        "notes.md#Zorblax trick"
    );
    assert!(both.search("bank conflicts", 1).unwrap()[0]
        .source
        .starts_with("cuda.md#"));

    // The same directory twice is indexed once.
    let twice =
        Knowledge::from_dirs(&[dir.path().to_path_buf(), dir.path().join("sub/..")]).unwrap();
    assert_eq!(twice.len(), 3);

    // A path naming a single file indexes that file.
    let file = Knowledge::from_dirs(&[dir.path().join("notes.md")]).unwrap();
    assert_eq!(file.len(), 2);
}

#[test]
fn missing_directory_error_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir");
    for result in [
        Knowledge::open(std::slice::from_ref(&missing)),
        Knowledge::from_dirs(std::slice::from_ref(&missing)),
    ] {
        let err = result.unwrap_err();
        assert!(matches!(&err, KnowledgeError::Io { path, .. } if *path == missing));
        assert!(err.to_string().contains("no-such-dir"), "{err}");
    }
}

#[test]
fn non_utf8_file_error_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("good.md"), "# ok\n\nfine\n").unwrap();
    std::fs::write(dir.path().join("bad.md"), b"# bad\n\n\xff\xfe\x00 broken\n").unwrap();
    let err = Knowledge::from_dirs(&[dir.path().to_path_buf()]).unwrap_err();
    assert!(err.to_string().contains("bad.md"), "{err}");
    assert!(err.to_string().contains("UTF-8"), "{err}");
}

#[test]
fn directory_without_documents_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("code.c"), "int main() {}").unwrap();
    let err = Knowledge::open(&[dir.path().to_path_buf()]).unwrap_err();
    assert!(matches!(err, KnowledgeError::Empty { .. }), "{err}");
    assert!(err.to_string().contains(&dir.path().display().to_string()));
}

#[test]
fn no_directories_is_an_empty_corpus() {
    let k = Knowledge::from_dirs(&[]).unwrap();
    assert_eq!(k.len(), 0);
    assert!(k.is_empty());
    assert!(k.search("softmax", 5).unwrap().is_empty());
    assert!(k.retrieve("softmax", 5, 1000).unwrap().is_empty());
}

#[test]
fn long_sections_are_split_on_paragraphs() {
    let dir = tempfile::tempdir().unwrap();
    let para = "Lorem ipsum dolor sit amet tiling words. ".repeat(10); // ~410 chars
    let para = para.trim_end();
    let mut text = String::from("# Big\n\n## Huge section\n\n");
    for i in 0..20 {
        text.push_str(&format!("Paragraph {i} marker{i}. {para}\n\n"));
    }
    std::fs::write(dir.path().join("big.md"), &text).unwrap();
    let k = Knowledge::from_dirs(&[dir.path().to_path_buf()]).unwrap();
    assert!(k.len() >= 4, "{}", k.len());
    for p in k.passages() {
        assert!(
            p.source.starts_with("big.md#Huge section (part "),
            "{}",
            p.source
        );
        assert!(p.text.chars().count() <= 2600);
        // Paragraphs are never cut.
        assert_eq!(
            p.text.matches("Paragraph ").count(),
            p.text.matches(para).count()
        );
    }
    let hits = k.search("marker17", 1).unwrap();
    assert!(hits[0].text.contains("Paragraph 17 marker17."));
}

#[test]
fn knowledge_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Knowledge>();
    let k = builtin();
    std::thread::scope(|s| {
        for q in ["softmax", "bank conflicts", "openmp schedule"] {
            s.spawn(move || assert!(!k.search(q, 3).unwrap().is_empty()));
        }
    });
}

#[test]
fn scan_notes_reach_only_scan_tasks_and_no_passage_is_cut_to_its_heading() {
    let k = Knowledge::open(&[]).unwrap();
    let q = "row normalization cumulative sum running total per row";
    let from = |op| {
        k.retrieve_scoped(q, Some("c"), Some(op), 5, 3000)
            .unwrap()
            .into_iter()
            .map(|p| p.source)
            .collect::<Vec<_>>()
    };
    assert!(
        from("scan").iter().any(|s| s.starts_with("scans.md")),
        "{:?}",
        from("scan")
    );
    assert!(
        !from("normalization")
            .iter()
            .any(|s| s.starts_with("scans.md")),
        "{:?}",
        from("normalization")
    );
    // However small the budget, a passage is shown with some of its body or not at all.
    for max in [40, 120, 300, 700] {
        for p in k.retrieve_scoped(q, Some("c"), None, 3, max).unwrap() {
            let body: usize = p.text.lines().skip(1).map(|l| l.trim().len()).sum();
            assert!(body > 100, "budget {max}: {:?}", p.text);
        }
    }
}
