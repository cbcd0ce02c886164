fn main() {
    let k = ksmith_knowledge::Knowledge::open(&[]).unwrap();
    let q = std::env::args().nth(1).unwrap();
    for p in k.search(&q, 6).unwrap() {
        println!("{:7.3} {}  [{}]", p.score, p.source, p.text.len());
    }
}
