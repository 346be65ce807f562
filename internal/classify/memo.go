package classify

import (
	"sync"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// observationMemo remembers Observation's judgement of the observations a
// run of many cells has already judged, by everything Observation reads of
// one: cells whose servers answered a probe alike (the short answers of
// healthy and degraded backends, an error every crashed server gave) are
// judged once. Observation is pure, so what the memo returns is what it
// would have computed. A nil memo judges every observation. It is safe for
// use by several goroutines (a sweep judges its slots' cells at once), and
// bounded: once the texts it holds pass memoBytes it forgets them all and
// starts again, so a long sweep of cells that each answer differently
// (garbage is rarely alike) holds no more than that.
type observationMemo = *memoTable

type memoTable struct {
	mu    sync.Mutex
	m     map[observationKey]judged
	bytes int // of the keys' and judgements' texts
	limit int // memoBytes; tests set less
}

// memoBytes bounds the texts a memo holds: thousands of short answers, or
// a few hundred long ones.
const memoBytes = 8 << 20

func newMemo() observationMemo { return &memoTable{m: map[observationKey]judged{}, limit: memoBytes} }

// len is how many judgements the memo holds.
func (m *memoTable) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}

// observationKey is what Observation reads of an observation (errKind,
// httpVerdict, the logprobs' health, Answer), and no more: a probe's name,
// timings and logprob steps do not change its judgement.
type observationKey struct {
	kind                            evidence.ProbeKind
	errKind                         evidence.ErrorKind
	err, endpoint                   string
	status                          int
	badLogprobs                     bool
	text, reasoning, finish, prompt string
	tokens                          int
	hasTokens                       bool
	maxTokens                       int
	expect                          expectKey
}

// expectKey is an Expect by value (its Number is a pointer).
type expectKey struct {
	set                    bool
	number                 float64
	hasNumber              bool
	contains, regex, exact string
	count                  int
}

// judged is Observation's result.
type judged struct {
	verdict      Verdict
	reason, evid string
}

func keyOf(o evidence.Observation) observationKey {
	k := observationKey{
		kind: o.Kind, errKind: o.ErrKind, err: o.Err, endpoint: o.Endpoint, status: o.HTTPStatus,
		badLogprobs: o.Logprobs.Bad(), text: o.Text, reasoning: o.Reasoning, finish: o.FinishReason,
		prompt: o.Prompt, maxTokens: o.MaxTokens,
	}
	if o.Tokens != nil {
		k.tokens, k.hasTokens = *o.Tokens, true
	}
	if e := o.Expect; e != nil {
		k.expect = expectKey{set: true, contains: e.Contains, regex: e.Regex, exact: e.Exact, count: e.Count}
		if e.Number != nil {
			k.expect.number, k.expect.hasNumber = *e.Number, true
		}
	}
	return k
}

// judge is Observation(o), from the memo when an alike observation was
// judged before.
// Two goroutines judging alike observations at once may both compute it:
// the lock is held only to look up and to remember.
func (m *memoTable) judge(o evidence.Observation) (Verdict, string, string) {
	if m == nil {
		return Observation(o)
	}
	k := keyOf(o)
	m.mu.Lock()
	j, ok := m.m[k]
	m.mu.Unlock()
	if ok {
		return j.verdict, j.reason, j.evid
	}
	v, reason, ev := Observation(o)
	size := len(k.text) + len(k.reasoning) + len(k.prompt) + len(k.err) + len(reason) + len(ev)
	m.mu.Lock()
	if m.bytes+size > m.limit {
		clear(m.m)
		m.bytes = 0
	}
	if _, ok := m.m[k]; !ok {
		m.m[k] = judged{v, reason, ev}
		m.bytes += size
	}
	m.mu.Unlock()
	return v, reason, ev
}

// Judge judges the cells of one run, as Cell does, each observation alike
// to one it judged before (in any of the run's cells) from its memory:
// what judges a whole run again (bmx report --rejudge, a new yardstick)
// judges ten thousand cells' mostly alike answers once each, and a sweep
// judges its cells through one as they end. It is safe for use by several
// goroutines. A nil Judge is Cell.
type Judge struct{ memo observationMemo }

// NewJudge is a Judge that remembers nothing yet.
func NewJudge() *Judge { return &Judge{memo: newMemo()} }

// Cell is Cell(in).
func (j *Judge) Cell(in Input) Judgement {
	if j == nil {
		return Cell(in)
	}
	return cellWith(in, j.memo)
}
