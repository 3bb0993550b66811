package gui

import "strings"

// Test access to state that production code keeps for itself.

// openPrompt is the findings dialog shown now, nil when none is open.
func (s *nodesStep) openPrompt() *applyPrompt {
	if s.shown != nil && s.ui.modal == s.shown.modal {
		return s.shown
	}
	return nil
}

// applying says whether a config is being sent to a node.
func (s *nodesStep) applying() bool {
	for _, r := range s.rows {
		if strings.HasPrefix(r.reply.Text, "Sending") {
			return true
		}
	}
	return false
}
