package expr

import (
	"strconv"
	"testing"
)

func benchCondition(b *testing.B, src string, opts []Option, ev Event, ctx Ctx, wantFast bool) {
	b.Helper()
	c, err := NewCompiler(opts...)
	if err != nil {
		b.Fatal(err)
	}
	cond, err := c.Condition(src)
	if err != nil {
		b.Fatal(err)
	}
	if cond.FastPath() != wantFast {
		b.Fatalf("FastPath() = %v, want %v", cond.FastPath(), wantFast)
	}
	if _, err := cond.Eval(ev, ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := cond.Eval(ev, ctx); err != nil {
			b.Fatal(err)
		}
	}
}

var benchEvent = Event{"type": "LOGIN", "user": "alice", "amount": 42.5, "n": int64(7), "geo": map[string]any{"country": "DE"}}

func BenchmarkEvalEqualsFastPath(b *testing.B) {
	benchCondition(b, `e.type == "LOGIN"`, nil, benchEvent, nil, true)
}

func BenchmarkEvalEqualsCEL(b *testing.B) {
	benchCondition(b, `e.type == "LOGIN"`, []Option{WithoutFastPath()}, benchEvent, nil, false)
}

func BenchmarkEvalCompoundFastPath(b *testing.B) {
	benchCondition(b, `e.type == "LOGIN" && e.amount > 10 && e.geo.country in ["DE", "FR"]`, nil, benchEvent, nil, true)
}

func BenchmarkEvalCompoundCEL(b *testing.B) {
	benchCondition(b, `e.type == "LOGIN" && e.amount > 10 && e.geo.country in ["DE", "FR"]`, []Option{WithoutFastPath()}, benchEvent, nil, false)
}

func BenchmarkEvalEvents(b *testing.B) {
	ctx := fakeCtx{"a": make([]Event, 10)}
	for i := range ctx["a"] {
		ctx["a"][i] = Event{"amount": float64(i), "user": "u" + strconv.Itoa(i)}
	}
	benchCondition(b, `e.amount > avg(events("a").map(x, x.amount))`, nil, benchEvent, ctx, false)
}

func BenchmarkEvalEventsLast(b *testing.B) {
	ctx := fakeCtx{"a": {{"amount": 1.0}, {"amount": 2.0}}}
	benchCondition(b, `e.amount > last(events("a")).amount`, nil, benchEvent, ctx, false)
}

// BenchmarkDecodeEvent compares DecodeEvent with encoding/json alone on
// typical events: one with nested values, and a flat one (the cluster
// benchmark's).
func BenchmarkDecodeEvent(b *testing.B) {
	for _, ev := range []struct{ name, json string }{
		{"nested", `{"k":"key-123","ts":1732900000123,"type":"B","v":42,"amount":12.5,"tags":["a","b"],"geo":{"lat":52.1,"lon":4.3}}`},
		{"flat", `{"k":"k00123","type":"B","ts":1234567,"v":42}`},
	} {
		for _, c := range []struct {
			name string
			f    func([]byte) (Event, error)
		}{{"DecodeEvent", DecodeEvent}, {"encoding-json", decodeStd}} {
			b.Run(ev.name+"/"+c.name, func(b *testing.B) {
				data := []byte(ev.json)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.f(data); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
