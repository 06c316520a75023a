package sched

// tree is a set of items ordered by a unique key, each with a weight (its
// bytes of work), that answers in O(log n): the first item, the count
// and weight of the items before a key, and insertions and deletions. A
// treap whose priorities are a hash of the key, so that its shape is
// deterministic.
type tree[T any] struct {
	root *treeNode[T]
}

type treeNode[T any] struct {
	key         treeKey
	item        T
	weight      int64
	prio        uint64
	left, right *treeNode[T]
	count       int   // items in this subtree
	sum         int64 // their weight
}

// treeKey orders items: by hi, then lo.
type treeKey struct{ hi, lo uint64 }

func (a treeKey) less(b treeKey) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

// mix64 is splitmix64's finaliser: the priority of a key.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

func (n *treeNode[T]) fix() {
	n.count, n.sum = 1, n.weight
	if n.left != nil {
		n.count += n.left.count
		n.sum += n.left.sum
	}
	if n.right != nil {
		n.count += n.right.count
		n.sum += n.right.sum
	}
}

// split returns the items of n with keys less than k, and the others.
func split[T any](n *treeNode[T], k treeKey) (lt, ge *treeNode[T]) {
	if n == nil {
		return nil, nil
	}
	if n.key.less(k) {
		n.right, ge = split(n.right, k)
		n.fix()
		return n, ge
	}
	lt, n.left = split(n.left, k)
	n.fix()
	return lt, n
}

// merge joins a and b, every key of a less than every key of b.
func merge[T any](a, b *treeNode[T]) *treeNode[T] {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.prio > b.prio:
		a.right = merge(a.right, b)
		a.fix()
		return a
	}
	b.left = merge(a, b.left)
	b.fix()
	return b
}

// insert adds item under key k, which must not be in t.
func (t *tree[T]) insert(k treeKey, item T, weight int64) {
	n := &treeNode[T]{key: k, item: item, weight: weight, prio: mix64(k.hi*0x9e3779b97f4a7c15 ^ k.lo)}
	n.fix()
	lt, ge := split(t.root, k)
	t.root = merge(merge(lt, n), ge)
}

// remove deletes key k, if it is in t.
func (t *tree[T]) remove(k treeKey) {
	t.root = removeKey(t.root, k)
}

func removeKey[T any](n *treeNode[T], k treeKey) *treeNode[T] {
	if n == nil {
		return nil
	}
	switch {
	case k.less(n.key):
		n.left = removeKey(n.left, k)
	case n.key.less(k):
		n.right = removeKey(n.right, k)
	default:
		return merge(n.left, n.right)
	}
	n.fix()
	return n
}

// first returns the item with the least key.
func (t *tree[T]) first() (item T, ok bool) {
	n := t.root
	if n == nil {
		return item, false
	}
	for n.left != nil {
		n = n.left
	}
	return n.item, true
}

// last returns the item with the greatest key.
func (t *tree[T]) last() (item T, ok bool) {
	n := t.root
	if n == nil {
		return item, false
	}
	for n.right != nil {
		n = n.right
	}
	return n.item, true
}

// before returns how many items have keys less than k, and their weight.
func (t *tree[T]) before(k treeKey) (count int, weight int64) {
	for n := t.root; n != nil; {
		if n.key.less(k) {
			count++
			weight += n.weight
			if n.left != nil {
				count += n.left.count
				weight += n.left.sum
			}
			n = n.right
		} else {
			n = n.left
		}
	}
	return count, weight
}

// len returns the number of items and their weight.
func (t *tree[T]) len() (count int, weight int64) {
	if t.root == nil {
		return 0, 0
	}
	return t.root.count, t.root.sum
}

// ascend calls f on the items in key order until f returns false.
func (t *tree[T]) ascend(f func(T) bool) { ascendNode(t.root, f) }

func ascendNode[T any](n *treeNode[T], f func(T) bool) bool {
	return n == nil || ascendNode(n.left, f) && f(n.item) && ascendNode(n.right, f)
}
