//! The WGSL writer: kernel IR in, WGSL text out. Pure text, no wgpu; naga
//! validates the output in tests.
//!
//! Conventions shared with the wgpu executor: storage bindings are
//! `@group(0) @binding(i)` in kernel order, the uniform block follows them,
//! `bool` elements travel as `u32` words (0 or 1), converted on upload and
//! download by the executor. 64-bit types are written as `i64 u64 f64`, for
//! devices with `SHADER_INT64` / `SHADER_F64`.

mod namer;
mod writer;

pub use namer::Namer;
pub use writer::{literal, type_name, write_kernel, write_kernel_entry, WgslWriter, WriteError};

#[cfg(all(test, feature = "wgpu"))]
mod tests {
    use crate::codegen::lower::tests::stage;
    use crate::codegen::{lower_stage, Caps};
    use crate::expr::{BinaryOp, DType, ExprArena, Node, Scalar, UnaryOp};
    use crate::plan::{AggKind, Aggregate, Combine, ScanOp, Terminal};
    use smallvec::smallvec;

    /// Parses and validates `src` with naga, with 64-bit types and
    /// subgroups allowed.
    pub(crate) fn validate(src: &str) -> Result<(), String> {
        let module = naga::front::wgsl::parse_str(src).map_err(|e| e.emit_to_string(src))?;
        let caps = naga::valid::Capabilities::all();
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
            .subgroup_stages(naga::valid::ShaderStages::all())
            .subgroup_operations(naga::valid::SubgroupOperationSet::all())
            .validate(&module)
            .map_err(|e| e.emit_to_string(src))?;
        Ok(())
    }

    #[test]
    fn every_shape_and_type_validates_in_naga() {
        for subgroups in [false, true] {
            let caps = Caps {
                subgroups,
                ..Caps::default()
            };
            let shapes = [
                stage(|m, _| Terminal::Collect(smallvec![m]), false),
                stage(|m, g| Terminal::Collect(smallvec![m, g]), true),
                stage(
                    |m, g| {
                        Terminal::Reduce(smallvec![
                            Aggregate {
                                kind: AggKind::Sum,
                                column: Some(m)
                            },
                            Aggregate {
                                kind: AggKind::Min,
                                column: Some(m)
                            },
                            Aggregate {
                                kind: AggKind::Count,
                                column: None
                            },
                            Aggregate {
                                kind: AggKind::ArgMin,
                                column: Some(m)
                            },
                            Aggregate {
                                kind: AggKind::All,
                                column: Some(g)
                            },
                        ])
                    },
                    true,
                ),
                stage(
                    |m, _| Terminal::Scan {
                        column: m,
                        op: ScanOp::Sum,
                        exclusive: true,
                    },
                    false,
                ),
            ];
            for s in &shapes {
                let kp = lower_stage(s, &caps).unwrap();
                for k in &kp.kernels {
                    let src = super::write_kernel(k).unwrap();
                    validate(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
                }
            }
        }
    }

    #[test]
    fn every_operation_on_every_type_validates() {
        for ty in DType::ALL {
            let mut p = ExprArena::new();
            let x = p.push_typed(Node::Input(0), ty).unwrap();
            let mut outs = vec![x];
            for op in UnaryOp::ALL {
                if op.accepts(ty) {
                    outs.push(p.push(Node::Unary(op, x)).unwrap());
                }
            }
            for op in BinaryOp::ALL {
                if op.result_type(ty).is_some() {
                    outs.push(p.push(Node::Binary(op, x, x)).unwrap());
                }
            }
            for to in DType::ALL {
                outs.push(p.push_typed(Node::Cast(x), to).unwrap());
            }
            if ty.is_numeric() {
                outs.push(p.push(Node::MulAdd(x, x, x)).unwrap());
                outs.push(p.push(Node::Powi(x, 5)).unwrap());
                outs.push(p.push(Node::Powi(x, -3)).unwrap());
                let c = p.push(Node::Const(Scalar::I64(-7).cast(ty))).unwrap();
                outs.push(p.push(Node::Binary(BinaryOp::Div, x, c)).unwrap());
            }
            let s = crate::plan::Stage {
                inputs: smallvec![crate::plan::StageInput::Source(0)],
                enumerates: 0,
                range: smallvec![crate::plan::RangeOp::Join(0)],
                program: p,
                predicate: None,
                terminal: Terminal::Collect(outs.into_iter().collect()),
            };
            let kp = lower_stage(&s, &Caps::default()).unwrap();
            let src = super::write_kernel(&kp.kernels[0]).unwrap();
            validate(&src).unwrap_or_else(|e| panic!("{ty}: {e}\n{src}"));
        }
    }

    #[test]
    fn custom_combine_scan_validates() {
        let mut c = ExprArena::new();
        let a = c.push_typed(Node::Input(0), DType::I32).unwrap();
        let b = c.push_typed(Node::Input(1), DType::I32).unwrap();
        let m = c.push(Node::Binary(BinaryOp::Mul, a, b)).unwrap();
        let comb = Combine {
            program: c,
            output: m,
            identity: 0,
        };
        let mut p = ExprArena::new();
        let x = p.push_typed(Node::Input(0), DType::I32).unwrap();
        let s = crate::plan::Stage {
            inputs: smallvec![crate::plan::StageInput::Source(0)],
            enumerates: 0,
            range: smallvec![crate::plan::RangeOp::Join(0)],
            program: p,
            predicate: None,
            terminal: Terminal::Scan {
                column: x,
                op: ScanOp::Custom(comb.clone()),
                exclusive: false,
            },
        };
        for k in lower_stage(&s, &Caps::default()).unwrap().kernels {
            let src = super::write_kernel(&k).unwrap();
            validate(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        }
    }
}
