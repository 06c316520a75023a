module github.com/nodepass/nodepass/tools/testprogress

go 1.26.0
