package sched

import "github.com/hashicorp/golang-lru/v2/simplelru"

const (
	askSlots = 8     // passwords remembered per name
	askNames = 16384 // names remembered (LRU)
)

// askLog remembers, for the most recently asked names, the last askSlots
// passwords (as keys) asked for each and how often. A plain helper: the
// Scheduler calls it under its lock.
type askLog struct {
	seq   uint64 // asks so far; orders them
	names *simplelru.LRU[string, *nameAsks]
}

type nameAsks struct {
	keys   [askSlots]Key
	counts [askSlots]uint32
	last   [askSlots]uint64 // seq of the last ask; 0: slot unused
}

func newAskLog() askLog {
	names, err := simplelru.NewLRU[string, *nameAsks](askNames, nil)
	if err != nil {
		panic(err) // only for a non-positive size
	}
	return askLog{names: names}
}

// record counts an ask for (name, key). It returns how often that
// password has been asked for among the name's remembered ones, and the
// ask's place in the order of all asks.
func (l *askLog) record(name string, key Key) (count uint32, seq uint64) {
	l.seq++
	a, ok := l.names.Get(name)
	if !ok {
		a = &nameAsks{}
		l.names.Add(name, a)
	}
	oldest := 0
	for i := range a.keys {
		if a.last[i] != 0 && a.keys[i] == key {
			a.counts[i]++
			a.last[i] = l.seq
			return a.counts[i], l.seq
		}
		if a.last[i] < a.last[oldest] {
			oldest = i
		}
	}
	a.keys[oldest], a.counts[oldest], a.last[oldest] = key, 1, l.seq
	return 1, l.seq
}
