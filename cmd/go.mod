module github.com/nodepass/nodepass/cmd

go 1.26.0

require (
	github.com/google/pprof v0.0.0-20261105003125-4bf881d7fb0b
	github.com/nodepass/nodepass/bench v0.1.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.40.0
	gonum.org/v1/plot v0.17.0
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	git.sr.ht/~sbinet/gg v0.7.0 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/hashicorp/golang-lru/v2 v2.0.7 // indirect
	github.com/nodepass/nodepass v0.1.0
	golang.org/x/crypto v0.47.0 // indirect
	golang.org/x/image v0.30.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/text v0.44.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)

replace (
	github.com/nodepass/nodepass => ../
	github.com/nodepass/nodepass/bench => ../bench
)
