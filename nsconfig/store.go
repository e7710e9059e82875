package nsconfig

import (
	"context"

	"github.com/sbgate/sbgate/store"
)

// StoreNamespace is the namespace a store holds, for applying a file at sbgate's start.
func StoreNamespace(st store.Store) Namespace { return storeNamespace{st} }

type storeNamespace struct{ st store.Store }

// page is how many entities or rules one list call asks for.
const page = 500

func (s storeNamespace) ListEntities(ctx context.Context, kind store.Kind, parent string) ([]*store.Entity, error) {
	var all []*store.Entity
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

func (s storeNamespace) ListRules(ctx context.Context, subPath string) ([]*store.Rule, error) {
	var all []*store.Rule
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

func (s storeNamespace) CreateEntity(ctx context.Context, kind store.Kind, path string, p store.Properties, first *store.Rule) error {
	var err error
	if kind == store.KindSubscription {
		_, err = s.st.CreateSubscription(ctx, path, p, first)
	} else {
		_, err = s.st.CreateEntity(ctx, kind, path, p)
	}
	return err
}

func (s storeNamespace) UpdateEntity(ctx context.Context, kind store.Kind, path string, p store.Properties) error {
	_, err := s.st.UpdateEntity(ctx, kind, path, p)
	return err
}

func (s storeNamespace) DeleteEntity(ctx context.Context, _ store.Kind, path string) error {
	return s.st.DeleteEntity(ctx, path)
}

func (s storeNamespace) PutRule(ctx context.Context, subPath string, r store.Rule, update bool) error {
	_, err := s.st.PutRule(ctx, subPath, r, update)
	return err
}

func (s storeNamespace) DeleteRule(ctx context.Context, subPath, name string) error {
	return s.st.DeleteRule(ctx, subPath, name)
}
