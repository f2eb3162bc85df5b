;; A pass-through filter written by hand in WebAssembly's text format: the whole of guest
;; interface version 1 (docs/notes/wasm.md, "The interface, version 1"). The engine asks for
;; an input area (kind 1) and an output window (kind 2) of at most 64 KiB; each buffer is
;; copied from the one to the other and emitted. Tests build it with the `wat` crate; by hand:
;; `wat2wasm examples/wasm/pass.wat -o pass.wasm` (wabt).
(module
  (import "offhost" "emit" (func $emit (param i32 i32)))
  (memory (export "memory") 3)
  (func (export "offhost_abi_version") (result i32) i32.const 1)
  (func (export "offhost_area") (param $kind i32) (param $index i32) (param $size i32) (result i32)
    (if (i32.gt_u (local.get $size) (i32.const 65536)) (then (return (i32.const 0))))
    (if (i32.eq (local.get $kind) (i32.const 1)) (then (return (i32.const 65536))))
    (if (i32.eq (local.get $kind) (i32.const 2)) (then (return (i32.const 131072))))
    i32.const 1024)
  (func (export "offhost_start") (param i32 i32 i32) (result i32) i32.const 0)
  (func (export "offhost_buffer") (param $in i32) (param $len i32) (result i32)
    (memory.copy (i32.const 131072) (i32.const 65536) (local.get $len))
    (call $emit (i32.const 0) (local.get $len)) i32.const 0)
  (func (export "offhost_end") (param i32) (result i32) i32.const 0)
  (func (export "offhost_resume") (result i32) i32.const 0))
