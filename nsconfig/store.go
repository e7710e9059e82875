package nsconfig

import (
	"context"

	"github.com/sbgate/sbgate/broker"
)

// StoreNamespace is the namespace a store holds, for applying a file at sbgate's start.
func StoreNamespace(st broker.Store) Namespace { return storeNamespace{st} }

type storeNamespace struct{ st broker.Store }

// page is how many entities or rules one list call asks for.
const page = 500

func (s storeNamespace) ListEntities(ctx context.Context, kind broker.Kind, parent string) ([]*broker.Entity, error) {
	var all []*broker.Entity
	for skip := 0; ; skip += page {
		got, err := s.st.ListEntities(ctx, kind, parent, skip, page)
		if err != nil {
			return nil, err
		}
		all = append(all, got...)
		if len(got) < page {
			return all, nil
		}
	}
}

func (s storeNamespace) ListRules(ctx context.Context, subPath string) ([]*broker.Rule, error) {
	var all []*broker.Rule
	for skip := 0; ; skip += page {
		got, err := s.st.ListRules(ctx, subPath, skip, page)
		if err != nil {
			return nil, err
		}
		all = append(all, got...)
		if len(got) < page {
			return all, nil
		}
	}
}

func (s storeNamespace) CreateEntity(ctx context.Context, kind broker.Kind, path string, p broker.Properties, first *broker.Rule) error {
	var err error
	if kind == broker.KindSubscription {
		_, err = s.st.CreateSubscription(ctx, path, p, first)
	} else {
		_, err = s.st.CreateEntity(ctx, kind, path, p)
	}
	return err
}

func (s storeNamespace) UpdateEntity(ctx context.Context, kind broker.Kind, path string, p broker.Properties) error {
	_, err := s.st.UpdateEntity(ctx, kind, path, p)
	return err
}

func (s storeNamespace) DeleteEntity(ctx context.Context, _ broker.Kind, path string) error {
	return s.st.DeleteEntity(ctx, path)
}

func (s storeNamespace) PutRule(ctx context.Context, subPath string, r broker.Rule, update bool) error {
	_, err := s.st.PutRule(ctx, subPath, r, update)
	return err
}

func (s storeNamespace) DeleteRule(ctx context.Context, subPath, name string) error {
	return s.st.DeleteRule(ctx, subPath, name)
}
