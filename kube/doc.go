// Package kube is a [verify.Store] over the Kubernetes Secrets that k3s and
// RKE2 already keep for their nodes, so that a server using nodepass reads
// and writes the same node passwords as the distribution itself.
//
// A node's hash lives in the secret
// strings.ToLower(node + ".node-password." + program) in kube-system, under
// the data key "hash". [Store.Get] answers from an informer cache of that
// namespace (no API call per request: per-request GETs through client-go's
// rate limiter are what stalled k3s servers during a cluster-wide reboot);
// [Store.Create] writes to the API server, creating an immutable secret of
// type <program>.cattle.io/node-password as k3s does; before a node is
// enrolled, [Store.GetFresh] confirms the cache's miss with a direct read,
// within a budget. Secrets written by older releases with another type
// (Opaque) are read all the same.
//
// The informer watches every secret in the namespace, because k3s does not
// label its node-password secrets; a transform keeps only the name,
// namespace, UID, type, resource version, "hash" and remembered digest
// (DigestAnnotation) of node-password secrets, and only the name,
// namespace and resource version of the others, so the cache stays small.
//
// The usual life cycle:
//
//	store, err := kube.New(clientset.CoreV1(), &kube.Options{Program: "k3s"})
//	...
//	if err := store.Start(ctx); err != nil { ... } // informer in the background
//	defer store.Close()                              // stops it and waits
//	v, err := verify.New(store, nil)
//
// The service account needs get, list, watch and create on secrets in the
// namespace, and patch for remembered digests (Store.RememberDigest).
package kube
