package cluster

import (
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Describe lists every family the collector has, so that a registry and
// MetricFamilies know the families a scrape shows only in some states.
func TestCollectorDescribesEveryFamily(t *testing.T) {
	c := newCollector(nil)
	ch := make(chan *prometheus.Desc, 100)
	c.Describe(ch)
	close(ch)
	described := map[*prometheus.Desc]bool{}
	for d := range ch {
		described[d] = true
	}
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Type() != reflect.TypeFor[*prometheus.Desc]() {
			continue
		}
		if d := (*prometheus.Desc)(f.UnsafePointer()); !described[d] {
			t.Errorf("collector.%s is not in Describe", v.Type().Field(i).Name)
		}
	}
}
