// Package kubefake is a fake core/v1 client for tests of code that uses
// kube.Store: client-go's typed fake over its object tracker, as
// kubernetes/fake builds it, but for the core API group only. The full
// fake clientset compiles every API group's fake client and doubles the
// cold build of a test binary; this one does not.
package kubefake

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	fakecorev1 "k8s.io/client-go/kubernetes/typed/core/v1/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Client is a fake core/v1 client (kube.New accepts it, since it has
// Secrets). Its calls go through the embedded k8stesting.Fake's reactors,
// so tests can PrependReactor and PrependWatchReactor to inject failures
// and delays, to the object tracker that holds the objects. It is safe for
// concurrent use.
type Client struct {
	fakecorev1.FakeCoreV1
	// Tracker holds the objects; add to it to change them behind the
	// client's back.
	Tracker k8stesting.ObjectTracker
}

// New returns a Client holding objects. It fails if an object cannot be
// added, e.g. a kind outside client-go's scheme.
func New(objects ...runtime.Object) (*Client, error) {
	tracker := k8stesting.NewObjectTracker(scheme.Scheme, scheme.Codecs.UniversalDecoder())
	for _, obj := range objects {
		if err := tracker.Add(obj); err != nil {
			return nil, fmt.Errorf("kubefake: %w", err)
		}
	}
	c := &Client{FakeCoreV1: fakecorev1.FakeCoreV1{Fake: &k8stesting.Fake{}}, Tracker: tracker}
	c.AddReactor("*", "*", k8stesting.ObjectReaction(tracker))
	c.AddWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := tracker.Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		return true, w, nil
	})
	return c, nil
}

// IsWatchListSemanticsUnSupported tells client-go's reflector that the
// tracker cannot stream a list as watch events, so informers over this
// Client list and then watch, as they do with kubernetes/fake.
func (c *Client) IsWatchListSemanticsUnSupported() bool { return true }
