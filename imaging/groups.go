package imaging

// FlashGroups: several images in one job (a cluster's control plane and
// workers), each image a FlashAll of its own, all at once.

import (
	"context"
	"errors"
	"io"
	"sync"
)

// FlashGroups flashes several images at once: each group is a FlashAll of
// its own (its source read and decoded once, its cards fed from that
// decode) and the groups run concurrently, each at the pace of its slowest
// card, so the job takes about the time of the slowest card of all.
//
// Before any source is opened or card touched, the job is refused (the
// error) when a target is named twice over all groups, is in use, or is
// the file of any group's image (a local file or cache entry): a card of
// one image never overwrites another's source. After that a group fails
// on its own: a failure before its cards are opened (its download, its
// format, its CheckHead) is each of its cards' Err, and its cards' own
// failures are theirs, as in FlashAll. The results are per group, in
// order, each in the order of its targets. The groups' Progress calls are
// serialized together (one front end renders them all). A group's
// Source.Stream that is an io.Closer is closed once its group is done
// (several streams may share one channel: app/elevate).
func FlashGroups(ctx context.Context, groups []FlashOptions) ([][]CardResult, error) {
	if len(groups) == 0 {
		return nil, errors.New("flash: no image")
	}
	var all []string
	for _, g := range groups {
		if len(g.Targets) == 0 {
			return nil, errors.New("flash: an image with no target")
		}
		all = append(all, g.Targets...)
	}
	if err := checkTargets(all); err != nil {
		return nil, err
	}
	for _, g := range groups {
		if s := g.Source.files(); s != nil {
			for _, name := range all {
				if err := s.notTarget(name); err != nil {
					return nil, err
				}
			}
		}
	}

	var mu sync.Mutex // one front end: the groups' reports one at a time
	results := make([][]CardResult, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		if fn := g.Progress; fn != nil {
			g.Progress = func(p Progress) {
				mu.Lock()
				defer mu.Unlock()
				fn(p)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cards, err := FlashAll(ctx, g)
			if c, ok := g.Source.Stream.(io.Closer); ok {
				c.Close() // done with it: other images on the same channel go on
			}
			if err != nil { // nothing of this group was touched
				cards = make([]CardResult, len(g.Targets))
				for j, name := range g.Targets {
					cards[j] = CardResult{Target: name, Err: err}
				}
			}
			results[i] = cards
		}()
	}
	wg.Wait()
	return results, nil
}

// files is the source's file as far as it is known before it is opened
// (a local file, a cache entry and its download), for notTarget; nil for
// a stream or a download that is not kept.
func (src Source) files() *openedSource {
	switch {
	case src.Stream != nil:
		return nil
	case src.Path != "":
		return &openedSource{path: src.Path}
	case src.NoCache || src.Key == "":
		return nil
	}
	cache := src.Cache
	if cache == nil {
		var err error
		if cache, err = DefaultCache(); err != nil {
			return nil // FlashAll says why
		}
	}
	p, err := cache.Path(src.Key)
	if err != nil {
		return nil // FlashAll says why
	}
	return &openedSource{cachePath: p, growingEntry: p}
}
