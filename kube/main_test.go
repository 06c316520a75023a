package kube

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/nodepass/nodepass/kube/apitest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(stopAPIServer{m})
}

// stopAPIServer runs the tests, then stops the API servers they shared (if
// any started), before goleak looks for leaked goroutines.
type stopAPIServer struct{ m *testing.M }

func (s stopAPIServer) Run() int {
	code := s.m.Run()
	for _, sh := range []*apitest.Shared{&apiserver, &restartable} {
		if err := sh.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}
