// Package schema validates storectl reports against the JSON Schemas of
// the storectl/v1 contract. It lives apart from package report so that the
// commands, which only emit reports, do not link the JSON Schema library:
// its package init compiles the draft meta-schemas (~1.5 MB allocated) in
// every process that imports it. Only the tests validate.
package schema

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/storectl/storectl/pkg/report"
)

// schemaFS holds the JSON Schema (draft 2020-12) of every object type of
// the storectl/v1 contract: run, record, file, finding, queue, action,
// summary (<type>.json, shared pieces in common.json).
//
//go:embed *.json
var schemaFS embed.FS

const schemaBase = "https://storectl.dev/schema/v1/"

// Types lists the object types that have a schema.
var Types = []string{"run", "record", "file", "finding", "queue", "action", "summary"}

// File returns the raw schema document for type typ.
func File(typ string) ([]byte, error) {
	return schemaFS.ReadFile(typ + ".json")
}

// Validator checks report objects against the embedded schemas.
type Validator struct{ byType map[string]*jsonschema.Schema }

// NewValidator compiles the embedded schemas.
func NewValidator() (*Validator, error) {
	c := jsonschema.NewCompiler()
	ents, err := schemaFS.ReadDir(".")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		b, err := schemaFS.ReadFile(e.Name())
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("schema/%s: %w", e.Name(), err)
		}
		if err := c.AddResource(schemaBase+e.Name(), doc); err != nil {
			return nil, err
		}
	}
	v := &Validator{byType: map[string]*jsonschema.Schema{}}
	for _, t := range Types {
		s, err := c.Compile(schemaBase + t + ".json")
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", t, err)
		}
		v.byType[t] = s
	}
	return v, nil
}

// ValidateObject validates one JSONL line (or any object with a type).
func (v *Validator) ValidateObject(b []byte) error {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	s, ok := v.byType[head.Type]
	if !ok {
		return fmt.Errorf("no schema for type %q", head.Type)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return s.Validate(doc)
}

// ValidateDocument validates a `-o json` document by checking each part
// against its type's schema (the document form carries no envelope, so
// one is added per part).
func (v *Validator) ValidateDocument(b []byte) error {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		return err
	}
	check := func(typ string, raw json.RawMessage) error {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return err
		}
		m["schema"], m["type"] = report.Schema, typ
		line, _ := json.Marshal(m)
		if err := v.ValidateObject(line); err != nil {
			return fmt.Errorf("%s: %w", typ, err)
		}
		return nil
	}
	for _, single := range []string{"run", "summary"} {
		raw, ok := doc[single]
		if !ok {
			return fmt.Errorf("document has no %q", single)
		}
		if err := check(single, raw); err != nil {
			return err
		}
	}
	for key, typ := range map[string]string{"records": "record", "files": "file", "findings": "finding", "queues": "queue", "actions": "action"} {
		var items []json.RawMessage
		if raw, ok := doc[key]; ok {
			if err := json.Unmarshal(raw, &items); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
		}
		for _, it := range items {
			if err := check(typ, it); err != nil {
				return err
			}
		}
	}
	return nil
}
