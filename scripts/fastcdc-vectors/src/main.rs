//! Generates FastCDC v2020 test vectors (Grove sync protocol parameters) as JSON on stdout.
//! Inputs are described by generator + seed + size so the fixture stays small; the
//! TypeScript tests regenerate the same bytes (see packages/core/src/chunking/TestInputs.ts).
//!
//!   cd scripts/fastcdc-vectors && cargo run --release -q > ../../packages/core/src/chunking/fixtures/fastcdc-v2020.json
use fastcdc::v2020::{get_gear_with_seed, FastCDC, Normalization};

const MIN: u32 = 256 * 1024;
const AVG: u32 = 1024 * 1024;
const MAX: u32 = 4 * 1024 * 1024;
const MIB: usize = 1024 * 1024;

/// Marsaglia xorshift32 (13, 17, 5); each state is emitted as 4 little-endian bytes.
fn xorshift32(seed: u32, size: usize, map: impl Fn(u8) -> u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + 4);
    let mut x = seed;
    while out.len() < size {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        for b in x.to_le_bytes() {
            out.push(map(b));
        }
    }
    out.truncate(size);
    out
}

fn generate(generator: &str, seed: u32, size: usize) -> Vec<u8> {
    match generator {
        "xorshift32" => xorshift32(seed, size, |b| b),
        // low entropy: 2 random bits per byte, spread over "ACGT"
        "xorshift32-acgt" => xorshift32(seed, size, |b| b"ACGT"[(b & 3) as usize]),
        "zeros" => vec![0u8; size],
        "mod251" => (0..size).map(|i| (i % 251) as u8).collect(),
        _ => panic!("unknown generator {generator}"),
    }
}

fn main() {
    let inputs: [(&str, u32, usize); 8] = [
        ("xorshift32", 1, 10 * MIB),
        ("xorshift32", 0x9e37_79b9, 23 * MIB + 7),
        ("xorshift32", 42, 40 * MIB + 1),
        ("xorshift32", 7, 300 * 1024),
        ("xorshift32", 8, 256 * 1024),
        ("xorshift32-acgt", 3, 12 * MIB + 3),
        ("zeros", 0, 13 * MIB + 5),
        ("mod251", 0, 11 * MIB),
    ];
    let (gear, _) = get_gear_with_seed(0);
    let gear_hex: Vec<String> = gear.iter().map(|g| format!("\"{g:016x}\"")).collect();
    let mut entries = Vec::new();
    for (generator, seed, size) in inputs {
        let data = generate(generator, seed, size);
        let chunks: Vec<String> = FastCDC::with_level(&data, MIN, AVG, MAX, Normalization::Level1)
            .map(|c| {
                let hash = blake3::hash(&data[c.offset..c.offset + c.length]);
                format!(
                    "        {{ \"offset\": {}, \"length\": {}, \"hash\": \"{}\" }}",
                    c.offset,
                    c.length,
                    hash.to_hex()
                )
            })
            .collect();
        entries.push(format!(
            "    {{\n      \"generator\": \"{generator}\",\n      \"seed\": {seed},\n      \"size\": {size},\n      \"blake3\": \"{}\",\n      \"chunks\": [\n{}\n      ]\n    }}",
            blake3::hash(&data).to_hex(),
            chunks.join(",\n")
        ));
    }
    println!("{{");
    println!("  \"crate\": \"fastcdc 3.2.1 v2020\",");
    println!("  \"minSize\": {MIN},\n  \"avgSize\": {AVG},\n  \"maxSize\": {MAX},\n  \"normalization\": 1,");
    println!("  \"gear\": [{}],", gear_hex.join(", "));
    println!("  \"inputs\": [\n{}\n  ]", entries.join(",\n"));
    println!("}}");
}
