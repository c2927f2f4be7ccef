//! Pipelines: what may be one, and their serialized form (every shape
//! round-trips; a malformed or foreign document is a clear error, never a
//! panic).

use computeq::query::Pipeline;
use computeq::ErrorKind;

/// One pipeline of every shape a pipeline may take.
fn shapes() -> Vec<(&'static str, Pipeline)> {
    let k = 3i64;
    vec![
        ("sum", Pipeline::over::<f64>(|q| q.sum()).unwrap()),
        (
            "map filter sum",
            Pipeline::over::<f32>(|q| q.map(|x| x * 2.0 + 1.0).filter(|x| x.gt(0.5)).sum())
                .unwrap(),
        ),
        (
            "count",
            Pipeline::over::<i32>(|q| q.filter(|x| (x & 1).eq(0)).count()).unwrap(),
        ),
        ("min", Pipeline::over::<u32>(|q| q.min()).unwrap()),
        (
            "max",
            Pipeline::over::<u64>(|q| q.map(|x| x >> 2).max()).unwrap(),
        ),
        ("mean", Pipeline::over::<i64>(|q| q.mean()).unwrap()),
        (
            "variance of i32",
            Pipeline::over::<i32>(|q| q.variance()).unwrap(),
        ),
        ("std_dev", Pipeline::over::<f32>(|q| q.std_dev()).unwrap()),
        (
            "any",
            Pipeline::over::<f64>(|q| q.any(|x| x.ne(x))).unwrap(),
        ),
        ("all", Pipeline::over::<bool>(|q| q.all(|b| b)).unwrap()),
        ("stats", Pipeline::over::<f64>(|q| q.stats()).unwrap()),
        (
            "aggregate of a zip",
            Pipeline::over::<(f64, i64)>(|q| {
                q.aggregate(|(x, n), a| (a.sum(x * n.cast::<f64>()), a.variance(n), a.count()))
            })
            .unwrap(),
        ),
        (
            "a count per column read",
            Pipeline::over::<(f64, i64)>(|q| {
                q.aggregate(|(x, n), a| (a.min(x), a.mean(n), a.max(n * 2), a.count()))
            })
            .unwrap(),
        ),
        (
            "three inputs",
            Pipeline::over::<(f32, f32, u32)>(|q| {
                q.filter(|((_, _), m)| m.gt(0))
                    .map(|((x, y), _)| x.mul_add(y, 1.0))
                    .sum()
            })
            .unwrap(),
        ),
        (
            "four inputs, collect",
            Pipeline::over::<(i64, i64, i64, i64)>(|q| {
                q.map(|(((a, b), c), d)| (a + b) * c - d + k)
                    .collect::<Vec<_>>()
            })
            .unwrap(),
        ),
        (
            "captured NaN and infinities",
            Pipeline::over::<f64>(|q| {
                q.map(|x| x.max(f64::NEG_INFINITY) + f64::NAN * 0.0)
                    .filter(|x| x.lt(f64::INFINITY))
                    .collect::<Vec<_>>()
            })
            .unwrap(),
        ),
    ]
}

#[test]
fn every_shape_round_trips() {
    for (name, p) in shapes() {
        let bytes = p.to_bytes();
        let back = Pipeline::from_bytes(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(back, p, "{name}");
        assert_eq!(back.to_string(), p.to_string(), "{name}");
        assert_eq!(back.outputs(), p.outputs(), "{name}");
        assert_eq!(back.to_bytes(), bytes, "{name}: the form is stable");
    }
}

#[test]
fn a_pipeline_says_what_it_is() {
    let p = Pipeline::over::<(f64, i64)>(|q| {
        q.filter(|(x, _)| x.gt(0.0))
            .aggregate(|(x, n), a| (a.mean(x), a.max(n)))
    })
    .unwrap();
    assert_eq!(
        p.to_string(),
        "pipeline(f64, i64): zip, filter -> (mean, max)"
    );
    assert!(p.is_aggregate());
    assert!(!p.keeps_rows());
    let out = p.outputs();
    assert_eq!(out.len(), 2);
    assert_eq!(
        (out[0].name.as_str(), out[0].dtype),
        ("c0", computeq::expr::DType::F64)
    );
    assert_eq!(
        (out[1].name.as_str(), out[1].dtype),
        ("c1", computeq::expr::DType::I64)
    );
    assert!(out[1].nullable, "the max of no rows is null");
}

#[test]
fn what_needs_the_global_order_or_every_row_is_refused() {
    let refused: Vec<(&str, Result<Pipeline, computeq::Error>)> = vec![
        (
            "enumerate",
            Pipeline::over::<f64>(|q| q.enumerate().map(|(i, x)| x * i.cast::<f64>()).sum()),
        ),
        ("skip", Pipeline::over::<f64>(|q| q.skip(3).sum())),
        ("take", Pipeline::over::<f64>(|q| q.take(3).sum())),
        ("scan", Pipeline::over::<f64>(|q| q.scan_sum().sum())),
        ("sort", Pipeline::over::<f64>(|q| q.sort().sum())),
        ("argmin", Pipeline::over::<f64>(|q| q.argmin())),
        ("first", Pipeline::over::<f64>(|q| q.first())),
        ("last", Pipeline::over::<f64>(|q| q.last())),
        (
            "reduce",
            Pipeline::over::<f64>(|q| q.reduce(0.0, |a, b| a + b)),
        ),
        (
            "group_by",
            Pipeline::over::<i64>(|q| q.group_by(|x| x & 7).sum()),
        ),
        ("distinct", Pipeline::over::<i64>(|q| q.distinct())),
        (
            "histogram",
            Pipeline::over::<f64>(|q| q.histogram(4, 0.0, 1.0)),
        ),
    ];
    for (what, r) in refused {
        let e = r.expect_err(what);
        assert_eq!(e.kind(), ErrorKind::InvalidQuery, "{what}: {e}");
        assert!(
            e.to_string()
                .contains(what.split('_').next().unwrap_or(what)),
            "{what}: {e}"
        );
    }
}

fn rejected(doc: &str) -> String {
    match Pipeline::from_bytes(doc.as_bytes()) {
        Ok(p) => panic!("accepted {doc}: {p}"),
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::InvalidQuery);
            e.to_string()
        }
    }
}

#[test]
fn malformed_and_foreign_documents_are_clear_errors() {
    let good = String::from_utf8(
        Pipeline::over::<f64>(|q| q.filter(|x| x.gt(0.5)).map(|x| x * x).sum())
            .unwrap()
            .to_bytes(),
    )
    .unwrap();
    assert!(rejected("").contains("not a pipeline document"));
    assert!(rejected("{}").contains("not a pipeline document"));
    assert!(rejected(r#"{"format":"parquet","version":1}"#).contains("format"));
    let other = format!(r#""version":{}"#, computeq::query::WIRE_VERSION + 1);
    let v = good.replace(
        &format!(r#""version":{}"#, computeq::query::WIRE_VERSION),
        &other,
    );
    assert_ne!(v, good, "the document has the version this test edits");
    assert!(rejected(&v).contains(&format!("version {}", computeq::query::WIRE_VERSION + 1)));
    // Version 1 counted a min's rows as every column's: not read.
    let v1 = good.replace(
        &format!(r#""version":{}"#, computeq::query::WIRE_VERSION),
        r#""version":1"#,
    );
    assert!(rejected(&v1).contains("version 1"));
    assert!(rejected(&good[..good.len() / 2]).contains("malformed"));
    // A node that reads a value defined after it.
    let forward = good.replacen(r#"{"Binary":["Gt",0,1]}"#, r#"{"Binary":["Gt",0,9]}"#, 1);
    assert_ne!(forward, good, "the document has the node this test edits");
    assert!(rejected(&forward).contains("node"));
    // A filter of a number.
    let not_bool = good.replacen(
        r#""Filter":{"predicate":2}"#,
        r#""Filter":{"predicate":0}"#,
        1,
    );
    assert_ne!(not_bool, good);
    assert!(rejected(&not_bool).contains("bool"));
    // An aggregate that is not partition-local.
    let argmin = good.replacen(r#"["Sum","#, r#"["ArgMin","#, 1);
    assert_ne!(argmin, good);
    assert!(rejected(&argmin).contains("malformed"));
    // A value read past the aggregates.
    let past = good.replacen(r#"[["Value",[0,0]]]"#, r#"[["Value",[0,7]]]"#, 1);
    assert_ne!(past, good);
    assert!(rejected(&past).contains("not there"));
    // A captured value of another type than its node.
    let p = String::from_utf8(
        Pipeline::over::<f64>(|q| q.map(|x| x + 2.5).sum())
            .unwrap()
            .to_bytes(),
    )
    .unwrap();
    let mistyped = p.replacen(r#""params":[["F64","#, r#""params":[["I32","#, 1);
    assert_ne!(mistyped, p);
    assert!(rejected(&mistyped).contains("mistyped"));
}

/// Every single-byte change of a valid document: read back or refused,
/// never a panic (the run of what is read back is tested with DataFusion
/// in `tests/datafusion.rs`).
#[test]
fn no_byte_change_makes_reading_panic() {
    for (name, p) in shapes() {
        let bytes = p.to_bytes();
        for i in 0..bytes.len() {
            for b in [b'0', b'9', b'"', b'[', b'{', b'-', b'x'] {
                let mut m = bytes.clone();
                m[i] = b;
                let r = std::panic::catch_unwind(|| Pipeline::from_bytes(&m).map(|p| p.to_bytes()));
                assert!(
                    r.is_ok(),
                    "{name}: byte {i} set to {:?} panicked",
                    b as char
                );
            }
        }
    }
}
