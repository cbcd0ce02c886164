//! `ksmith report RUN`: a real serial agent run (scripted provider, real judge) and a graph
//! search written through the store API, each rendered to one HTML file that must reference
//! nothing outside itself, show candidate text as text, and draw its charts and tree in
//! headless Chromium (the screenshot must have real content where they are).

mod common;

use common::{fresh_store, ksmith, root, small_task, stderr, stdout, text};
use ksmith_judge::Status;
use ksmith_search::{Hint, Node, NodeId, NodeOutcome, NodeState, Spend};
use ksmith_store::{NodeRecord, RunRow, RunStatus, Store};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const EVIL: &str = "</script><script>alert(1)</script>";

/// A kernel whose comment tries to end the page's script and start its own.
fn vector_add_omp() -> String {
    format!(
        "#include <stdint.h>\n\n/* {EVIL} <img src=x onerror=alert(2)> */\nvoid vector_add(const float* a, const float* b, float* c, int64_t N) {{\n    #pragma omp parallel for\n    for (int64_t i = 0; i < N; i++)\n        c[i] = a[i] + b[i];\n}}\n"
    )
}

fn reply(role: &str, text: &str) -> String {
    assert!(!text.contains("'''"));
    format!("[[reply]]\nrole = \"{role}\"\nexpect = []\ntext = '''\n{text}'''\n\n")
}

fn run_id(o: &Output) -> String {
    common::search_run_id(&text(o))
}

/// The page's checks that need no browser: self-contained, candidate text inert.
fn assert_self_contained(page: &str) {
    let lower = page.to_ascii_lowercase();
    for bad in ["http://", "https://", "<script", "url(", "@import", "<link"] {
        assert!(
            !lower.contains(bad),
            "the page references `{bad}`: {}",
            &page[lower.find(bad).unwrap().saturating_sub(200)..][..400.min(page.len())]
        );
    }
    // Candidate text is escaped, so every raw `<` opens one of the page's own tags: none of
    // them may load anything.
    for tag in page.split('<').skip(1) {
        let tag = tag.split('>').next().unwrap_or("").to_ascii_lowercase();
        assert!(
            !tag.contains("src=") && !tag.contains("href=") && !tag.starts_with("img"),
            "a tag loads something: <{tag}>"
        );
    }
    assert!(page.contains("Content-Security-Policy"));
    for id in ["plot-wall", "plot-evals", "plot-tokens"] {
        let at = page
            .find(&format!("id=\"{id}\""))
            .unwrap_or_else(|| panic!("no chart {id}"));
        assert!(page[at..].starts_with(&format!("id=\"{id}\"><svg")), "{id}");
    }
    assert!(page.contains("id=\"tree-svg\""));
}

/// The Chromium binary, or a failure saying what to install.
fn chromium() -> PathBuf {
    let names = [
        "chromium-headless-shell",
        "chromium",
        "chromium-browser",
        "google-chrome",
        "headless_shell",
    ];
    for dir in std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/lib/chromium")])
    {
        for n in names {
            let p = dir.join(n);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "headless Chromium is needed to check the report renders: install it \
         (Debian: `apt-get install -y chromium-headless-shell`; .ci/run does)"
    );
}

/// Screenshot of `page` at 1280x2400, decoded to (width, height, RGBA bytes).
fn screenshot(page: &Path, dir: &Path) -> (u32, u32, Vec<u8>) {
    let png_path = dir.join("shot.png");
    let profile = dir.join("chromium-profile");
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            "--window-size=1280,2400",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png_path.display()))
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            assert!(st.success() && png_path.exists(), "chromium failed: {err}");
            break;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("chromium took more than 120 s to take a screenshot");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&png_path).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    let rgba: Vec<u8> = match info.color_type {
        png::ColorType::Rgba => buf,
        png::ColorType::Rgb => buf
            .chunks(3)
            .flat_map(|p| [p[0], p[1], p[2], 255])
            .collect(),
        other => panic!("unexpected PNG colour type {other:?}"),
    };
    (info.width, info.height, rgba)
}

/// Fraction of pixels in the box (x0..x1, y0..y1) that are clearly not white (any channel
/// below 200: text, lines, filled boxes; not the light grid).
fn ink(shot: &(u32, u32, Vec<u8>), x0: u32, x1: u32, y0: u32, y1: u32) -> f64 {
    let (w, h, px) = shot;
    let (x1, y1) = (x1.min(*w), y1.min(*h));
    let mut dark = 0usize;
    for y in y0..y1 {
        for x in x0..x1 {
            let i = ((y * w + x) * 4) as usize;
            if px[i..i + 3].iter().any(|&c| c < 200) {
                dark += 1;
            }
        }
    }
    dark as f64 / ((x1 - x0) * (y1 - y0)).max(1) as f64
}

/// The plots sit under the 64 px header in a 320 px band; the tree's boxes start below.
fn assert_rendered(shot: &(u32, u32, Vec<u8>), tree_rows: u32) {
    assert_eq!((shot.0, shot.1), (1280, 2400), "window size");
    let plots = ink(shot, 16, 1240, 74, 380);
    assert!(plots > 0.02, "the chart band is nearly blank ({plots:.4})");
    // Each chart on its own: three columns of 400 px.
    for (i, x0) in [16u32, 424, 832].into_iter().enumerate() {
        let one = ink(shot, x0, x0 + 400, 74, 380);
        assert!(one > 0.015, "chart {i} is nearly blank ({one:.4})");
    }
    let tree = ink(shot, 16, 416, 450, 450 + 76 * tree_rows);
    assert!(tree > 0.10, "the tree band is nearly blank ({tree:.4})");
}

#[test]
fn an_agent_run_report_is_self_contained_and_renders_its_charts_and_chain() {
    let dir = tempfile::tempdir().unwrap();
    let store = fresh_store(dir.path());
    let scenario = dir.path().join("scenario.toml");
    std::fs::write(
        &scenario,
        [
            reply(
                "planner",
                &format!(
                    "## Strategy\nParallelize with OpenMP. {EVIL}\n## Expected effect\n1.5x\n## Risks\nNone.\n"
                ),
            ),
            reply("implementer", &format!("kernel.c\n```c\n{}```\n", vector_add_omp())),
        ]
        .concat(),
    )
    .unwrap();
    let model = format!("scripted:{}", scenario.display());
    // vector_add at a small size (the run's length is the judge's), with its naive start.
    let task = small_task(
        "vector_add",
        dir.path(),
        "[[workloads]]\naxes = { N = 200003 }\n[workloads.inputs]\na = { dist = \"normal\", mean = 0.0, std = 1.0 }\nb = { dist = \"uniform\", low = -2.0, high = 2.0 }\n",
    );
    let naive = root().join("tasks/starter/vector_add/solutions/naive");
    std::fs::create_dir_all(task.join("solutions/naive")).unwrap();
    for f in std::fs::read_dir(&naive).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(
            &f,
            task.join("solutions/naive").join(f.file_name().unwrap()),
        )
        .unwrap();
    }
    let o = ksmith(
        &store,
        &[
            "optimize",
            task.to_str().unwrap(),
            "--model",
            &model,
            "--iterations",
            "1",
            "--no-profile",
            "--tune-budget",
            "0",
            "--min-time-ms",
            "20",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let id = run_id(&o);

    let o = ksmith(&store, &["report", &id]);
    assert!(o.status.success(), "{}", text(&o));
    let out = stdout(&o);
    let file = store.join("reports").join(format!("{id}.html"));
    assert!(
        out.contains(&format!("report: {}", file.display())),
        "{out}"
    );
    assert!(out.contains("graph search"), "{out}");
    assert!(
        out.contains("winner (written) ") && out.contains("x at n"),
        "{out}"
    );
    assert!(out.contains("2 calls"), "{out}");
    let page = std::fs::read_to_string(&file).unwrap();
    assert_self_contained(&page);
    // The start and node 1 in the chain, one edge between them.
    let tree = &page[page.find("id=\"tree-svg\"").unwrap()..];
    let tree = &tree[..tree.find("</svg>").unwrap()];
    assert_eq!(tree.matches("<rect").count(), 2, "{tree}");
    assert_eq!(tree.matches("<line").count(), 1, "{tree}");
    // The plan's hostile text is shown as text (in the node table and the box's title).
    assert!(
        page.matches("&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;")
            .count()
            >= 2,
        "the hostile summary is not shown as text"
    );
    // Which node wins depends on this machine's load; the page shows that one's source,
    // and the OpenMP kernel's (with its hostile comment) in the diff when it won.
    let winner = &page[page.find("id=\"winner\"").unwrap()..];
    assert!(winner.contains("<pre class=\"source\">"), "{winner}");
    if winner.contains("n1 ·") {
        assert!(
            winner.contains("class=\"add\""),
            "the diff has no added line"
        );
        assert!(winner.contains("&lt;img src=x onerror=alert(2)&gt;"));
    } else {
        assert!(
            winner.contains("the winner is the start itself"),
            "{winner}"
        );
    }
    // The winner's per-workload roofline fractions and the cost per role.
    let roof = &page[page.find("id=\"roofline\"").expect("roofline table")..];
    assert!(roof.contains("class=\"bar\""));
    let cost = &page[page.find("id=\"cost\"").unwrap()..];
    assert!(cost.contains("<td>planner</td>") && cost.contains("<td>implementer</td>"));

    let shot = screenshot(&file, dir.path());
    assert_rendered(&shot, 2);

    // Elsewhere with --out; an unknown run is an input error naming it.
    let other = dir.path().join("elsewhere/r.html");
    let o = ksmith(&store, &["report", &id, "--out", other.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&other).unwrap(), page);
    let o = ksmith(&store, &["report", "run-nope"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(stderr(&o).contains("run-nope"), "{}", text(&o));
}

fn node(
    id: u64,
    parent: Option<u64>,
    hint: Hint,
    state: NodeState,
    status: Option<Status>,
    speedup: Option<f64>,
    code: Option<&str>,
) -> Node {
    Node {
        id: NodeId(id),
        parent: parent.map(NodeId),
        depth: 0,
        hint,
        state,
        plan: format!("plan of n{id} <b onmouseover=alert(3)>bold</b>"),
        code_hash: code.map(str::to_string),
        norm_hash: None,
        duplicate_of: None,
        outcome: NodeOutcome {
            status,
            speedup,
            interval: speedup.map(|s| (s * 0.95, s * 1.05)),
            roofline_fraction: None,
            eval_id: None,
            vs_parent: None,
        },
        spend: Spend {
            calls: 2,
            tokens: 1000 + id * 100,
            cost: 0.01,
            evaluations: u64::from(status.is_some()),
            wall_s: 3.0,
        },
        feedback: Default::default(),
    }
}

#[test]
fn a_search_run_report_draws_every_node_with_its_parent_and_the_winner_diff() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    let mut store = Store::open(&store_dir).unwrap();
    let id = "run-search-test";
    store
        .create_run(&RunRow {
            id: id.into(),
            created_at: String::new(),
            updated_at: String::new(),
            task_dir: "tasks/starter/softmax".into(),
            task: "softmax".into(),
            tests_hash: "t".into(),
            model: "sim:pool".into(),
            mode: "autonomous".into(),
            options: "{}".into(),
            status: RunStatus::Finished,
            stop_reason: None,
            active_s: 42.0,
            out_dir: None,
        })
        .unwrap();
    let start = store
        .put_artifact(b"void softmax(void) {\n    /* naive */\n}\n")
        .unwrap();
    let better = store
        .put_artifact(format!("void softmax(void) {{\n    /* tiled {EVIL} */\n}}\n").as_bytes())
        .unwrap();
    let other = store
        .put_artifact(b"void softmax(void) { /* x */ }\n")
        .unwrap();
    let nodes = [
        node(
            0,
            None,
            Hint::FirstKernel,
            NodeState::Done,
            Some(Status::Passed),
            Some(1.1),
            Some(&start),
        ),
        node(
            1,
            Some(0),
            Hint::Tile,
            NodeState::Done,
            Some(Status::Passed),
            Some(1.9),
            Some(&other),
        ),
        node(
            2,
            Some(0),
            Hint::Vectorize,
            NodeState::Done,
            Some(Status::CompileError),
            None,
            Some(&other),
        ),
        node(
            3,
            Some(1),
            Hint::Fuse,
            NodeState::Duplicate,
            None,
            None,
            Some(&other),
        ),
        node(
            4,
            Some(1),
            Hint::Unroll,
            NodeState::Done,
            Some(Status::Passed),
            Some(1.4),
            Some(&better),
        ),
        node(
            5,
            Some(2),
            Hint::Algorithm,
            NodeState::NoCandidate,
            None,
            None,
            None,
        ),
    ];
    // One step per node, as the engine persists them.
    for n in &nodes {
        let rec = NodeRecord {
            id: n.id.0,
            parent: n.parent.map(|p| p.0),
            state: n.state.as_str().into(),
            speedup: n.outcome.speedup,
            payload: serde_json::to_string(n).unwrap(),
            created_at: String::new(),
        };
        store.record_search_step(id, &[rec], "{}").unwrap();
    }
    // The final judgement chose node 4 (re-timed together, node 1's 1.90x alone did not
    // hold): the report names the kernel written, not the best first figure.
    let finals = serde_json::json!({
        "node": 4, "incumbent": 0,
        "summary": "node 4: better: 1.30x (1.10-1.50) in the same rounds against the start",
        "held_out": "M=1001 N=255", "retimed": 1,
        "finalists": [
            {"node": 0, "eval_id": 1, "status": "PASSED", "held_out": "PASSED",
             "together": {"speedup": 1.0, "low": 0.9, "high": 1.1}, "vs_incumbent": null,
             "decision": "incumbent"},
            {"node": 1, "eval_id": 2, "status": "PASSED", "held_out": "INCORRECT_NUMERICAL",
             "together": {"speedup": 1.2, "low": 0.8, "high": 1.7},
             "vs_incumbent": {"speedup": 1.2, "low": 0.8, "high": 1.7}, "decision": "not eligible"},
            {"node": 4, "eval_id": 3, "status": "PASSED", "held_out": "PASSED",
             "together": {"speedup": 1.3, "low": 1.1, "high": 1.5},
             "vs_incumbent": {"speedup": 1.3, "low": 1.1, "high": 1.5}, "decision": "better"}
        ]
    });
    store
        .record_event(id, 0, "winner", &finals.to_string())
        .unwrap();
    drop(store);

    let file = dir.path().join("out/search.html");
    let o = ksmith(&store_dir, &["report", id, "--out", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let out = stdout(&o);
    assert!(out.contains("graph search"), "{out}");
    assert!(out.contains("winner (written) 1.40x at n4"), "{out}");
    assert!(out.contains("decided: node 4: better"), "{out}");
    assert!(out.contains("12 calls"), "{out}");
    let page = std::fs::read_to_string(&file).unwrap();
    assert_self_contained(&page);
    let finals = &page[page.find("id=\"finalists\"").expect("a finalists section")..];
    let finals = &finals[..finals.find("</section>").unwrap()];
    assert!(finals.contains("4 (winner)"), "{finals}");
    assert!(
        finals.contains("not eligible") && finals.contains("INCORRECT_NUMERICAL"),
        "{finals}"
    );
    assert!(finals.contains("M=1001 N=255"), "{finals}");
    assert!(
        page.contains("Winning kernel (the one written)"),
        "the page names the written winner"
    );
    let tree = &page[page.find("id=\"tree-svg\"").unwrap()..];
    let tree = &tree[..tree.find("</svg>").unwrap()];
    assert_eq!(tree.matches("<rect").count(), 6, "{tree}");
    assert_eq!(tree.matches("<line").count(), 5, "one edge per parent link");
    for cls in ["node best", "node passed", "node failed", "node skipped"] {
        assert!(tree.contains(cls), "no `{cls}` in the tree");
    }
    assert!(tree.contains("n1 · 1.90x") && tree.contains("n2 · COMPILE_ERROR"));
    assert!(page.contains("duplicate"));
    // The winner's diff from its root, the hostile comment as text, the plan's tag inert.
    assert!(page.contains("diff from n0"));
    assert!(page.contains("&lt;/script&gt;&lt;script&gt;alert(1)"));
    assert!(page.contains("&lt;b onmouseover=alert(3)&gt;"));
    assert!(!page.contains("<b onmouseover"));
    let shot = screenshot(&file, dir.path());
    assert_rendered(&shot, 3);

    // On a store this user cannot write: the default place is refused (exit 2, saying why),
    // --out elsewhere works and gives the same page.
    chmod(dir.path(), 0o755);
    chmod_tree(&store_dir, 0o555, 0o444);
    let open = dir.path().join("open");
    std::fs::create_dir_all(&open).unwrap();
    chmod(&open, 0o777);
    let o = as_reader(&store_dir, &["report", id]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        stderr(&o).contains("read-only") && stderr(&o).contains("--out"),
        "{}",
        text(&o)
    );
    assert!(!store_dir.join("reports").exists());
    let elsewhere = open.join("r.html");
    let o = as_reader(
        &store_dir,
        &["report", id, "--out", elsewhere.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), page);
    chmod_tree(&store_dir, 0o755, 0o644);
}

fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Directories to `dir_mode`, files to `file_mode`, recursively.
fn chmod_tree(p: &Path, dir_mode: u32, file_mode: u32) {
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            chmod_tree(&e.unwrap().path(), dir_mode, file_mode);
        }
        chmod(p, dir_mode);
    } else {
        chmod(p, file_mode);
    }
}

/// Runs ksmith as a user who cannot write the store (nobody, when the tests run as root).
fn as_reader(store: &Path, args: &[&str]) -> Output {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ksmith"));
    cmd.arg("--store").arg(store).args(args).current_dir(root());
    if unsafe { libc::geteuid() } == 0 {
        unsafe {
            cmd.pre_exec(|| {
                if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd.env("HOME", "/nonexistent");
    }
    cmd.output().unwrap()
}
