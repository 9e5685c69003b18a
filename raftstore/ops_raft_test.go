package raftstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
)

func TestTransferLeaderToNamedVoter(t *testing.T) {
	c := threeVoters(t, longReap)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	leader := c.leader(10 * time.Second)
	f := c.follower()

	if _, err := f.TransferLeader(ctx, ""); !errors.Is(err, state.ErrNotLeader) {
		t.Fatalf("transfer on a follower: want not_leader, got %v", err)
	}
	if _, err := leader.TransferLeader(ctx, leader.NodeID()); !errors.Is(err, state.ErrConflict) {
		t.Fatalf("transfer to itself: want conflict, got %v", err)
	}
	if _, err := leader.TransferLeader(ctx, "nobody"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("transfer to an unknown server: want not_found, got %v", err)
	}
	res, err := leader.TransferLeader(ctx, f.NodeID())
	if err != nil {
		t.Fatal(err)
	}
	if res.From != leader.NodeID() {
		t.Fatalf("result %+v", res)
	}
	if got := c.leader(10 * time.Second); got.NodeID() != f.NodeID() {
		t.Fatalf("leader after transfer to %s is %s", f.NodeID(), got.NodeID())
	}

	// Without a target, leadership goes to some other voter.
	l2 := c.leader(10 * time.Second)
	if _, err := l2.TransferLeader(ctx, ""); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "a new leader", func() bool {
		id, _ := l2.Leader()
		return id != "" && id != l2.NodeID()
	})
}

func TestRemovePeerRefusalsAndDeadServer(t *testing.T) {
	c := threeVoters(t, longReap)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	leader := c.leader(10 * time.Second)
	var dead, live string
	for id := range c.nodes {
		if id != leader.NodeID() {
			if dead == "" {
				dead = id
			} else {
				live = id
			}
		}
	}
	if _, err := leader.RemovePeer(ctx, leader.NodeID(), true); !errors.Is(err, state.ErrConflict) {
		t.Fatalf("removing the leader: want conflict even with force, got %v", err)
	}
	if _, err := leader.RemovePeer(ctx, "nobody", false); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("removing an unknown server: want not_found, got %v", err)
	}
	if _, err := c.nodes[live].RemovePeer(ctx, dead, false); !errors.Is(err, state.ErrNotLeader) {
		t.Fatalf("remove on a follower: want not_leader, got %v", err)
	}

	c.kill(dead)
	// With one voter dead, removing the other live one would leave 2 voters
	// with 1 alive: refused without --force.
	_, err := leader.RemovePeer(ctx, live, false)
	if !errors.Is(err, state.ErrConflict) || !strings.Contains(err.Error(), "quorum") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("removing a live voter below quorum: want a conflict naming quorum and --force, got %v", err)
	}
	if sf := suffrage(t, leader); sf[live] != "Voter" {
		t.Fatalf("refused removal changed the configuration: %v", sf)
	}

	// Removing the dead one is safe.
	res, err := leader.RemovePeer(ctx, dead, false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Alive || res.Suffrage != "voter" || res.Index == 0 {
		t.Fatalf("result %+v", res)
	}
	testwait.For(t, 5*time.Second, "the dead server gone from every configuration", func() bool {
		for _, s := range c.nodes {
			if _, ok := suffrage(t, s)[dead]; ok {
				return false
			}
		}
		return true
	})
}

func TestRemovePeerAliveComesBack(t *testing.T) {
	c := threeVoters(t, longReap)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	leader := c.leader(10 * time.Second)
	var victim string
	for id := range c.nodes {
		if id != leader.NodeID() {
			victim = id
			break
		}
	}
	res, err := leader.RemovePeer(ctx, victim, false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Alive || !strings.Contains(res.Note, "adds it back") {
		t.Fatalf("removing a live server should say it comes back: %+v", res)
	}
	// The reconcile loop re-adds the alive member and promotes it again.
	testwait.For(t, 15*time.Second, "the live server back as a voter", func() bool {
		return suffrage(t, leader)[victim] == "Voter"
	})
}

func TestQuorumRefusal(t *testing.T) {
	for _, tc := range []struct {
		voters, live int
		victimLive   bool
		refused      bool
	}{
		{1, 1, true, true},   // the last voter
		{3, 3, true, false},  // 2 of 2 alive after
		{3, 2, true, true},   // 1 of 2 alive after
		{3, 2, false, false}, // the dead one: 2 of 2
		{5, 3, true, true},   // 2 of 4 alive, quorum 3
		{5, 4, true, false},  // 3 of 4
		{2, 1, false, false}, // 1 of 1
		{2, 2, true, false},  // 1 of 1
		{4, 2, false, false}, // 2 of 3 alive, quorum 2
		{4, 2, true, true},   // 1 of 3
	} {
		got := quorumRefusal("x", tc.voters, tc.live, tc.victimLive) != ""
		if got != tc.refused {
			t.Errorf("voters %d live %d victim live %v: refused %v, want %v", tc.voters, tc.live, tc.victimLive, got, tc.refused)
		}
	}
}
