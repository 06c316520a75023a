package kube

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodepass/nodepass/verify"
)

// DigestAnnotation is the annotation on a node-password secret that holds
// the digest of the password last verified against the secret's hash
// (see verify.Options.DigestKey), in standard base64. The hash itself is
// one of the digest's inputs, and a secret's hash never changes (it is
// immutable), so an annotation is only ever read with the hash it was
// made for.
const DigestAnnotation = "nodepass.github.io/verified-digest"

// GetWithDigest is Get, and also returns the digest remembered on node's
// secret, or nil when it has none or an unreadable one, from the same
// informer cache read (verify.DigestStore).
func (s *Store) GetWithDigest(ctx context.Context, node string) (string, []byte, error) {
	sec, err := s.secret(ctx, node)
	if err != nil {
		return "", nil, err
	}
	h, err := s.hashOf(sec)
	if err != nil {
		return "", nil, err
	}
	d, err := base64.StdEncoding.DecodeString(sec.Annotations[DigestAnnotation])
	if err != nil || len(d) == 0 {
		return h, nil, nil // a forged or damaged annotation is no digest
	}
	return h, d, nil
}

// RememberDigest sets DigestAnnotation on node's secret with a merge patch
// of its metadata only (verify.DigestStore): an immutable Secret's
// metadata may change (the API server's ValidateSecretUpdate, in
// k8s.io/kubernetes pkg/apis/core/validation, refuses only changes of its
// Data). The patch names the secret's UID, so that a secret deleted and
// made again since the cache saw it is not marked with the old hash's
// digest. Patches wait for their turn under Options.DigestWrites within
// ctx. The service account needs "patch" on secrets.
func (s *Store) RememberDigest(ctx context.Context, node, hash string, digest []byte) error {
	sec, err := s.secret(ctx, node)
	if err != nil {
		return err
	}
	if h, err := s.hashOf(sec); err != nil || h != hash {
		return nil // another hash now: its digest would never be read
	}
	value := base64.StdEncoding.EncodeToString(digest)
	if sec.Annotations[DigestAnnotation] == value {
		return nil
	}
	if err := s.writes.Wait(ctx); err != nil {
		return fmt.Errorf("kube: waiting to annotate secret %s/%s: %w", s.opts.Namespace, sec.Name, err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         sec.UID,
		"annotations": map[string]string{DigestAnnotation: value},
	}})
	if err != nil {
		return fmt.Errorf("kube: %w", err)
	}
	_, err = s.secrets.Patch(ctx, sec.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return fmt.Errorf("kube: secret %s/%s changed before its digest was recorded: %w", s.opts.Namespace, sec.Name, err)
	default:
		return fmt.Errorf("kube: annotating secret %s/%s: %w", s.opts.Namespace, sec.Name, err)
	}
}

var _ verify.DigestStore = (*Store)(nil)
