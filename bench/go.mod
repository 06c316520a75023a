module github.com/nodepass/nodepass/bench

go 1.26.0

require (
	github.com/nodepass/nodepass v0.1.0
	go.uber.org/goleak v1.3.0
	golang.org/x/crypto v0.47.0
	golang.org/x/sync v0.25.0
	golang.org/x/time v0.15.0
)

require (
	github.com/hashicorp/golang-lru/v2 v2.0.7 // indirect
	golang.org/x/sys v0.40.0 // indirect
)

replace github.com/nodepass/nodepass => ../
