package kube

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(stopAPIServer{m})
}

// stopAPIServer runs the tests, then stops the API server they shared (if
// any started), before goleak looks for leaked goroutines.
type stopAPIServer struct{ m *testing.M }

func (s stopAPIServer) Run() int {
	code := s.m.Run()
	if err := apiserver.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
