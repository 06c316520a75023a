module github.com/nodepass/nodepass

go 1.26.0

require (
	github.com/hashicorp/golang-lru/v2 v2.0.7
	go.uber.org/goleak v1.3.0
	golang.org/x/crypto v0.47.0
	golang.org/x/sys v0.40.0
	golang.org/x/time v0.15.0
)

require (
	github.com/davecgh/go-spew v1.1.2-0.20180830191138-d8f796af33cc // indirect
	github.com/pmezard/go-difflib v1.0.1-0.20181226105442-5d4384ee4fb2 // indirect
	github.com/stretchr/testify v1.11.1 // indirect
)
