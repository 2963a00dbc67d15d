package cluster

import "github.com/hashicorp/raft"

// MetaServers returns the metadata group's latest configuration as this
// node's Raft has it: the ids of its voters and of its non-voters, in the
// configuration's order.
func (n *Node) MetaServers() (voters, nonvoters []string, err error) {
	f := n.meta.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, nil, err
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters = append(voters, string(s.ID))
		} else {
			nonvoters = append(nonvoters, string(s.ID))
		}
	}
	return voters, nonvoters, nil
}
