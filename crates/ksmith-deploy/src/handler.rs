//! XLA FFI handlers generated from a task's signature: XLA's buffers bound to the kernel's C ABI
//! (DESIGN.md: inputs, outputs, then every axis as `int64_t`), shapes checked first.

use crate::DeployError;
use ksmith_task::{DType, Task};
use serde::Serialize;

/// Which device's handler to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    /// XLA's CPU platform; the kernel runs on the calling thread (it may use OpenMP).
    Cpu,
    /// XLA's CUDA platform; the kernel's launcher is ordered against XLA's stream by events.
    Cuda,
}

const CPU_TEMPLATE: &str = include_str!("../templates/ffi_cpu.cc.j2");
const CUDA_TEMPLATE: &str = include_str!("../templates/ffi_cuda.cu.j2");

/// XLA FFI's element type name for a task dtype.
fn ffi_type(d: DType) -> &'static str {
    match d {
        DType::Float32 => "F32",
        DType::Float64 => "F64",
        DType::Float16 => "F16",
        DType::Bfloat16 => "BF16",
        DType::Int8 => "S8",
        DType::Int16 => "S16",
        DType::Int32 => "S32",
        DType::Int64 => "S64",
        DType::Uint8 => "U8",
        DType::Bool => "PRED",
    }
}

#[derive(Serialize)]
struct ShapeCheck {
    role: &'static str,
    name: String,
    access: String,
    dims: String,
    shape_text: String,
}

#[derive(Serialize)]
struct ScalarRead {
    name: String,
    param: String,
    local: String,
    c_type: &'static str,
}

/// The handler's C++ source for `task`'s kernel `entry`, exported as `symbol`.
pub fn source(
    task: &Task,
    entry: &str,
    symbol: &str,
    device: Device,
) -> Result<String, DeployError> {
    let mut c_params = Vec::new();
    let mut impl_params = Vec::new();
    let mut binds = Vec::new();
    let mut call_args = Vec::new();
    let mut tensors = Vec::new();
    let mut scalars = Vec::new();
    let axis_param = |a: &str| format!("ax_{a}");
    let dims = |shape: &[String]| {
        shape
            .iter()
            .map(|a| axis_param(a))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for i in &task.inputs {
        let ty = ffi_type(i.dtype);
        let param = format!("in_{}", i.name);
        if i.is_scalar() {
            // BufferR0, not Buffer<T, 0>: the binding goes through a macro, where a comma
            // inside template arguments splits the argument list.
            impl_params.push(format!("ffi::BufferR0<ffi::{ty}> {param}"));
            binds.push(format!("Arg<ffi::BufferR0<ffi::{ty}>>()"));
            c_params.push(i.dtype.c_type().to_string());
            let local = format!("s_{}", i.name);
            call_args.push(local.clone());
            scalars.push(ScalarRead {
                name: i.name.clone(),
                param,
                local,
                c_type: i.dtype.c_type(),
            });
        } else {
            impl_params.push(format!("ffi::Buffer<ffi::{ty}> {param}"));
            binds.push(format!("Arg<ffi::Buffer<ffi::{ty}>>()"));
            c_params.push("const void*".into());
            call_args.push(format!("{param}.untyped_data()"));
            tensors.push(ShapeCheck {
                role: "input",
                name: i.name.clone(),
                access: format!("{param}."),
                dims: dims(&i.shape),
                shape_text: i.shape.join(", "),
            });
        }
    }
    for o in &task.outputs {
        let ty = ffi_type(o.tensor.dtype);
        let param = format!("out_{}", o.tensor.name);
        impl_params.push(format!("ffi::ResultBuffer<ffi::{ty}> {param}"));
        binds.push(format!("Ret<ffi::Buffer<ffi::{ty}>>()"));
        c_params.push("void*".into());
        call_args.push(format!("{param}->untyped_data()"));
        tensors.push(ShapeCheck {
            role: "output",
            name: o.tensor.name.clone(),
            access: format!("{param}->"),
            dims: dims(&o.tensor.shape),
            shape_text: o.tensor.shape.join(", "),
        });
    }
    for a in &task.axes {
        impl_params.push(format!("int64_t {}", axis_param(&a.name)));
        binds.push(format!("Attr<int64_t>(\"{}\")", a.name));
        c_params.push("int64_t".into());
        call_args.push(axis_param(&a.name));
    }
    let template = match device {
        Device::Cpu => CPU_TEMPLATE,
        Device::Cuda => CUDA_TEMPLATE,
    };
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    let render = |e: minijinja::Error| DeployError::Template {
        name: "ffi handler",
        message: format!("{e:#}"),
    };
    env.add_template("handler", template).map_err(render)?;
    env.get_template("handler")
        .and_then(|t| {
            t.render(minijinja::context! {
                name => &task.name,
                entry => entry,
                symbol => symbol,
                c_params => c_params.join(", "),
                impl_params => impl_params.join(", "),
                call_args => call_args.join(", "),
                binds => binds,
                tensors => tensors,
                scalars => scalars,
            })
        })
        .map_err(render)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(toml: &str) -> Task {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("task.toml"), toml).unwrap();
        std::fs::write(
            dir.path().join("reference.py"),
            "def reference(x, s):\n    return x * s\n",
        )
        .unwrap();
        Task::load(dir.path()).unwrap()
    }

    const SCALED: &str = r#"
name = "scaled"
description = "y = x * s"
op_class = "elementwise"
flops = "M * N"
bytes = "8 * M * N"
[axes]
M = { kind = "var" }
N = { kind = "const", value = 16 }
[[inputs]]
name = "x"
shape = ["M", "N"]
dtype = "bfloat16"
[[inputs]]
name = "s"
shape = []
dtype = "float32"
[[outputs]]
name = "y"
shape = ["M", "N"]
dtype = "bfloat16"
atol = 1e-2
rtol = 1e-2
[[workloads]]
axes = { M = 64 }
[workloads.inputs]
x = { dist = "normal", mean = 0.0, std = 1.0 }
s = { dist = "constant", value = 2.0 }
"#;

    #[test]
    fn cpu_handler_binds_buffers_scalars_and_axes_in_abi_order() {
        let src = source(&task(SCALED), "scaled", "ksmith_ffi_scaled", Device::Cpu).unwrap();
        // Declaration: pointers for tensors, the scalar by value, then every axis.
        assert!(
            src.contains("extern \"C\" void scaled(const void*, float, void*, int64_t, int64_t);"),
            "{src}"
        );
        // Call in the same order, the scalar read from its 0-d buffer.
        assert!(
            src.contains("scaled(in_x.untyped_data(), s_s, out_y->untyped_data(), ax_M, ax_N);")
        );
        assert!(src.contains("*static_cast<const float*>(in_s.untyped_data())"));
        // Bindings match the impl's parameter order; dtypes are XLA's.
        let binds: Vec<&str> = src
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with(".Arg") || l.starts_with(".Ret") || l.starts_with(".Attr"))
            .map(|l| l.strip_suffix(");").unwrap_or(l))
            .collect();
        assert_eq!(
            binds,
            [
                ".Arg<ffi::Buffer<ffi::BF16>>()",
                ".Arg<ffi::BufferR0<ffi::F32>>()",
                ".Ret<ffi::Buffer<ffi::BF16>>()",
                ".Attr<int64_t>(\"M\")",
                ".Attr<int64_t>(\"N\")",
            ]
        );
        // No comma inside a binding's template arguments (it would split the macro's arguments).
        assert!(binds.iter().all(|b| !b.contains(',')), "{binds:?}");
        // Both tensors are shape-checked before the call.
        assert!(src.contains("shape_is(in_x.dimensions(), { ax_M, ax_N })"));
        assert!(src.contains("shape_is(out_y->dimensions(), { ax_M, ax_N })"));
        assert!(src.contains("XLA_FFI_DEFINE_HANDLER_SYMBOL(ksmith_ffi_scaled, Impl,"));
    }

    #[test]
    fn cuda_handler_takes_xlas_stream_and_orders_the_legacy_stream_by_events() {
        let src = source(&task(SCALED), "scaled", "ksmith_ffi_scaled", Device::Cuda).unwrap();
        assert!(src.contains(".Ctx<ffi::PlatformStream<cudaStream_t>>()"));
        assert!(src.contains("ffi::Error Impl(cudaStream_t stream, ffi::Buffer<ffi::BF16> in_x"));
        let wait = src
            .find("cudaStreamWaitEvent(cudaStreamLegacy, ready, 0)")
            .unwrap();
        let call = src.find("scaled(in_x.untyped_data()").unwrap();
        let back = src.find("cudaStreamWaitEvent(stream, done, 0)").unwrap();
        assert!(wait < call && call < back);
        assert!(
            src.contains("cudaMemcpyDeviceToHost"),
            "scalars are copied to the host"
        );
    }
}
