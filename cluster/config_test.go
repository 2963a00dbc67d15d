package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// An empty Config takes DefaultConfig's values: the defaults live in one
// place, which cepnode's flags show.
func TestEmptyConfigTakesTheDefaults(t *testing.T) {
	var c Config
	c.setDefaults()
	d := DefaultConfig()
	if c.NodeID != d.NodeID || c.DataDir != d.DataDir || c.RaftAddr != d.RaftAddr || c.APIAddr != d.APIAddr ||
		c.NATSPort != d.NATSPort || c.KeyGroups != d.KeyGroups || c.Replicas != d.Replicas || c.DeadAfter != d.DeadAfter ||
		c.IngestBatch != d.IngestBatch || c.OutboxLimit != d.OutboxLimit || c.DeployWait != d.DeployWait ||
		c.TickEvery != d.TickEvery || c.HandOverAfter != d.HandOverAfter || c.StreamCheckEvery != d.StreamCheckEvery {
		t.Fatalf("defaults differ:\n%+v\n%+v", c, d)
	}
	if len(c.Peers) != 1 || c.Peers[0].ID != d.NodeID || c.Shards != 1 {
		t.Fatalf("a single node's peers and shards: %+v, %d", c.Peers, c.Shards)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateRefusesEachBadValue(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(c *Config)
	}{
		{"DeadAfter", func(c *Config) { c.DeadAfter = time.Second }},
		{"Replicas", func(c *Config) { c.Replicas = 0 }},
		{"KeyGroups", func(c *Config) { c.KeyGroups = 0 }},
		{"Shards", func(c *Config) { c.Shards = -1 }},
		{"IngestBatch", func(c *Config) { c.IngestBatch = 0 }},
		{"OutboxLimit", func(c *Config) { c.OutboxLimit = 0 }},
		{"DeployWait", func(c *Config) { c.DeployWait = 0 }},
		{"OutputLimits.MaxAge", func(c *Config) { c.OutputLimits.MaxAge = 10 * time.Minute }},
		{"OutputLimits.MaxBytes", func(c *Config) { c.OutputLimits.MaxBytes = -1 }},
		{"GossipKey", func(c *Config) { c.GossipKey = []byte("short") }},
		{"NATSCA", func(c *Config) { c.NATSCA = "ca.pem" }},
		{"Join", func(c *Config) { c.Join = []string{"127.0.0.1:7946"} }},
		{"Join", func(c *Config) { c.Join, c.NATSURL = []string{"seed"}, "nats://127.0.0.1:4222" }},
		{"CORSOrigins", func(c *Config) { c.CORSOrigins = []string{"https://ok.example.com", "console.example.com"} }},
	} {
		c := DefaultConfig()
		tc.edit(&c)
		err := c.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v", tc.field, err)
		}
	}
	c := DefaultConfig()
	c.DeadAfter, c.Testing = time.Second, &Testing{FastGossip: true}
	if err := c.Validate(); err != nil {
		t.Errorf("tests shorten DeadAfter: %v", err)
	}
}
