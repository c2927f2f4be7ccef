//! WGSL
