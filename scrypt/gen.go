package scrypt

// blockmix_amd64.s and its stubs come from the avo program in _asm, a
// module of its own so that this module does not require avo: go
// generate reproduces them byte for byte.
//go:generate env GOWORK=off go run -C _asm . -out ../blockmix_amd64.s -stubs ../blockmix_amd64_stubs.go -pkg scrypt
