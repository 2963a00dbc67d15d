package plan

import (
	"fmt"
	"slices"
)

// Kind is a change of a Raft group's configuration.
type Kind int

const (
	None        Kind = iota // nothing to change
	AddNonvoter             // add ID at Addr as a non-voter
	Promote                 // make non-voter ID at Addr a voter
	Remove                  // remove server ID
	// Transfer: this node, which leads the group, hands leadership over
	// (to ID at Addr when given, else to any voter) so that the next
	// leader removes it: a leader does not remove itself.
	Transfer
	// Demote: voter ID stays in the group as a non-voter.
	Demote
)

var kindNames = [...]string{"none", "non-voter added", "promoted to voter", "removed", "leadership handed over", "demoted to non-voter"}

func (k Kind) String() string { return kindNames[k] }

// Change is one configuration change of a group.
type Change struct {
	Kind Kind
	ID   string // the server changed (Transfer: the one to hand over to, if any)
	Addr string // its Raft address (AddNonvoter, Promote, Transfer to ID)
}

func (c Change) String() string {
	if c.Kind == None {
		return "none"
	}
	return fmt.Sprintf("%s %s", c.Kind, c.ID)
}

// Server is a server of a Raft configuration.
type Server struct {
	ID    string
	Addr  string
	Voter bool // else a non-voter
}

// serverIndex returns the index of id in servers, or -1.
func serverIndex(servers []Server, id string) int {
	return slices.IndexFunc(servers, func(s Server) bool { return s.ID == id })
}
