// Data that needs every kind of dynamic relocation ld.lld emits for an
// AMDGPU shared object: RELATIVE64 for a hidden symbol, ABS64 for an
// exported one and for undefined ones the loader must be told about.
	.amdgcn_target "amdgcn-amd-amdhsa--gfx90a"
	.data
	.globl gvar
	.p2align 3
gvar:
	.quad 42
hidden_var:
	.quad 7
	.globl ptrs
ptrs:
	.quad gvar
	.quad hidden_var+8
	.quad ext_sym+8
	.quad ext_sym2
	.quad 0
