package vendortest

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Intuit publishes no OpenAPI description of QuickBooks Online: its
// entities are XML schemas (shared/vendor-apis/quickbooks-online/*.xsd),
// and its JSON uses their element and attribute names. xsdSchema reads
// those schemas with encoding/xml into tables of elements and types, and
// checks JSON against them the way the JSON is written: an element or
// attribute is a member of its object, an element that may repeat is an
// array, a simpleContent type (ReferenceType) is an object whose text is
// "value", a substitution group's head (IntuitObject) stands for each of
// its members. A member the type does not declare, a scalar of the wrong
// JSON type or outside its enumeration, a date or time not in the schema's
// lexical form, or an array where one element is allowed, is a violation.

// qboSchemas is the folder of the schemas in the vendor-apis folder.
const qboSchemas = "quickbooks-online"

// xsdSchema is the schemas' global definitions.
type xsdSchema struct {
	complex  map[string]*xsdComplex
	simple   map[string]*xsdSimple
	elements map[string]xsdElement
	groups   map[string][]xsdNode
	// members are the elements of each substitution group, by its head.
	members map[string][]string
}

type xsdElement struct {
	typ      string
	abstract bool
}

// xsdComplex is a complex type: its own members, and its base's.
type xsdComplex struct {
	name string
	// base is the type it extends (complexContent); text the type of its
	// content when it is simple (simpleContent), written as "value".
	base, text string
	members    map[string]xsdMember
	// any is an xs:any wildcard: members of any name.
	any bool
}

type xsdMember struct {
	typ  string
	many bool
	// ref names a global element (a substitution group's head).
	ref string
}

type xsdSimple struct {
	base  string
	enums []string
}

// xsdNode is any element of a schema document.
type xsdNode struct {
	XMLName  xml.Name
	Attrs    []xml.Attr `xml:",any,attr"`
	Children []xsdNode  `xml:",any"`
}

func (n xsdNode) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

var qboSchema = sync.OnceValues(func() (*xsdSchema, error) {
	dir, err := vendorAPIsDir()
	if err != nil {
		return nil, err
	}
	return readXSD(filepath.Join(dir, qboSchemas))
})

// readXSD reads every schema in dir.
func readXSD(dir string) (*xsdSchema, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.xsd"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no XML schemas in %s", dir)
	}
	s := &xsdSchema{complex: map[string]*xsdComplex{}, simple: map[string]*xsdSimple{}, elements: map[string]xsdElement{},
		groups: map[string][]xsdNode{}, members: map[string][]string{}}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var root xsdNode
		if err := xml.Unmarshal(raw, &root); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
		for _, n := range root.Children {
			s.global(n)
		}
	}
	for _, need := range []string{"IntuitResponse", "Invoice", "Payment", "Customer", "CompanyInfo", "QueryResponse", "CDCResponse", "Fault"} {
		if s.complex[need] == nil {
			return nil, fmt.Errorf("the schemas in %s define no type %s", dir, need)
		}
	}
	return s, nil
}

// local drops a QName's prefix: the schemas share one namespace, and xs:
// names are kept whole.
func local(qname string) string {
	if strings.HasPrefix(qname, "xs:") {
		return qname
	}
	_, name, ok := strings.Cut(qname, ":")
	if ok {
		return name
	}
	return qname
}

func (s *xsdSchema) global(n xsdNode) {
	name := n.attr("name")
	switch n.XMLName.Local {
	case "complexType":
		s.complexType(name, n)
	case "simpleType":
		s.simpleType(name, n)
	case "element":
		typ := local(n.attr("type"))
		if typ == "" {
			typ = s.inlineType(name, n)
		}
		s.elements[name] = xsdElement{typ: typ, abstract: n.attr("abstract") == "true"}
		if head := local(n.attr("substitutionGroup")); head != "" {
			s.members[head] = append(s.members[head], name)
		}
	case "group":
		s.groups[name] = n.Children
	}
}

// inlineType registers an element's anonymous type under a name of its
// own and returns it ("" for none: any content).
func (s *xsdSchema) inlineType(name string, n xsdNode) string {
	for _, c := range n.Children {
		switch c.XMLName.Local {
		case "complexType":
			s.complexType("#"+name, c)
			return "#" + name
		case "simpleType":
			s.simpleType("#"+name, c)
			return "#" + name
		}
	}
	return ""
}

func (s *xsdSchema) complexType(name string, n xsdNode) {
	t := &xsdComplex{name: name, members: map[string]xsdMember{}}
	s.complex[name] = t
	s.content(t, n.Children, false)
}

// content adds the members of a type's particles: sequences, choices,
// groups, extensions, attributes.
func (s *xsdSchema) content(t *xsdComplex, nodes []xsdNode, many bool) {
	for _, c := range nodes {
		switch c.XMLName.Local {
		case "sequence", "choice", "all":
			s.content(t, c.Children, many || repeats(c.attr("maxOccurs")))
		case "group":
			s.content(t, s.groups[local(c.attr("ref"))], many || repeats(c.attr("maxOccurs")))
		case "complexContent":
			s.content(t, c.Children, many)
		case "simpleContent":
			for _, e := range c.Children {
				t.text = local(e.attr("base"))
				s.content(t, e.Children, many)
			}
		case "extension", "restriction":
			t.base = local(c.attr("base"))
			s.content(t, c.Children, many)
		case "element":
			m := xsdMember{many: many || repeats(c.attr("maxOccurs"))}
			name := c.attr("name")
			if ref := local(c.attr("ref")); ref != "" {
				name, m.ref = ref, ref
			} else if m.typ = local(c.attr("type")); m.typ == "" {
				m.typ = s.inlineType(t.name+"/"+name, c)
			}
			t.members[name] = m
		case "attribute":
			typ := local(c.attr("type"))
			if typ == "" {
				typ = s.inlineType(t.name+"/@"+c.attr("name"), c)
			}
			t.members[c.attr("name")] = xsdMember{typ: typ}
		case "any":
			t.any = true
		}
	}
}

// repeats reports whether a maxOccurs lets a particle occur more than once.
func repeats(maxOccurs string) bool {
	return maxOccurs != "" && maxOccurs != "0" && maxOccurs != "1"
}

func (s *xsdSchema) simpleType(name string, n xsdNode) {
	st := &xsdSimple{base: "xs:string"}
	s.simple[name] = st
	for _, c := range n.Children {
		if c.XMLName.Local != "restriction" {
			continue
		}
		st.base = local(c.attr("base"))
		for _, e := range c.Children {
			if e.XMLName.Local == "enumeration" {
				st.enums = append(st.enums, e.attr("value"))
			}
		}
	}
}

// member finds a member of a complex type or of the types it extends.
func (s *xsdSchema) member(t *xsdComplex, name string) (xsdMember, bool) {
	for seen := 0; t != nil && seen < 32; seen++ {
		if m, ok := t.members[name]; ok {
			return m, true
		}
		t = s.complex[t.base]
	}
	return xsdMember{}, false
}

// open reports whether a type or a type it extends takes any member.
func (s *xsdSchema) open(t *xsdComplex) bool {
	for seen := 0; t != nil && seen < 32; seen++ {
		if t.any {
			return true
		}
		t = s.complex[t.base]
	}
	return false
}

// text is the simple content of a type or of the type it extends.
func (s *xsdSchema) text(t *xsdComplex) string {
	for seen := 0; t != nil && seen < 32; seen++ {
		if t.text != "" {
			return t.text
		}
		if t.base != "" && s.complex[t.base] == nil {
			return t.base // extends a simple type
		}
		t = s.complex[t.base]
	}
	return ""
}

// elementType is the type of the member name of t: a referenced global
// element's own, or, for a substitution group's head, that of the member
// of the group so named.
func (s *xsdSchema) elementType(m xsdMember, name string) (string, bool) {
	if m.ref == "" {
		return m.typ, true
	}
	head := s.elements[m.ref]
	if !head.abstract {
		return head.typ, true
	}
	if slices.Contains(s.members[m.ref], name) {
		return s.elements[name].typ, true
	}
	return "", false
}

// check validates v, decoded JSON, as a value of typ; problems are
// appended with where they are.
func (s *xsdSchema) check(typ string, v any, at string, problems *[]string) {
	bad := func(format string, args ...any) {
		*problems = append(*problems, at+": "+fmt.Sprintf(format, args...))
	}
	if ct := s.complex[typ]; ct != nil {
		obj, ok := v.(map[string]any)
		if !ok {
			bad("%s is an object, got %s", typ, jsonKind(v))
			return
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			val := obj[k]
			if k == "value" && s.text(ct) != "" {
				s.check(s.text(ct), val, at+"/value", problems)
				continue
			}
			m, found := s.member(ct, k)
			if !found {
				m, found = s.substitute(ct, k)
			}
			if !found {
				if !s.open(ct) {
					bad("%s declares no element or attribute %q", typ, k)
				}
				continue
			}
			mt, ok := s.elementType(m, k)
			if !ok {
				bad("%q is no member of the substitution group %s", k, m.ref)
				continue
			}
			if arr, isArr := val.([]any); isArr {
				if !m.many {
					bad("%s.%s occurs once, got an array", typ, k)
					continue
				}
				for i, item := range arr {
					s.check(mt, item, fmt.Sprintf("%s/%s/%d", at, k, i), problems)
				}
				continue
			}
			s.check(mt, val, at+"/"+k, problems)
		}
		return
	}
	if st := s.simple[typ]; st != nil {
		if len(st.enums) > 0 {
			if str, ok := v.(string); !ok || !slices.Contains(st.enums, str) {
				bad("%v is not one of %s's values", v, typ)
				return
			}
		}
		s.check(st.base, v, at, problems)
		return
	}
	if err := checkBuiltin(typ, v); err != nil {
		bad("%v", err)
	}
}

// substitute finds a member of t named for a member of a substitution
// group that t refers to by its head (IntuitResponse's IntuitObject:
// "Invoice").
func (s *xsdSchema) substitute(t *xsdComplex, name string) (xsdMember, bool) {
	for seen := 0; t != nil && seen < 32; seen++ {
		for _, m := range t.members {
			if m.ref != "" && slices.Contains(s.members[m.ref], name) {
				return m, true
			}
		}
		t = s.complex[t.base]
	}
	return xsdMember{}, false
}

var (
	xsdDate     = regexp.MustCompile(`^-?\d{4}-\d{2}-\d{2}(Z|[+-]\d{2}:\d{2})?$`)
	xsdDateTime = regexp.MustCompile(`^-?\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?$`)
	xsdInteger  = regexp.MustCompile(`^[+-]?\d+$`)
)

// checkBuiltin checks a value of one of XML Schema's own types as JSON
// writes it.
func checkBuiltin(typ string, v any) error {
	switch typ {
	case "", "xs:anyType", "xs:anySimpleType":
		return nil
	case "xs:boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s is a boolean, got %s", typ, jsonKind(v))
		}
		return nil
	case "xs:int", "xs:long", "xs:integer", "xs:short", "xs:positiveInteger", "xs:nonNegativeInteger":
		n, ok := v.(json.Number)
		if !ok || !xsdInteger.MatchString(n.String()) {
			return fmt.Errorf("%s is a whole number, got %v", typ, v)
		}
		return nil
	case "xs:decimal", "xs:double", "xs:float":
		if _, ok := v.(json.Number); !ok {
			return fmt.Errorf("%s is a number, got %s", typ, jsonKind(v))
		}
		return nil
	}
	str, ok := v.(string)
	if !ok {
		return fmt.Errorf("%s is a string, got %s", typ, jsonKind(v))
	}
	switch typ {
	case "xs:date":
		if !xsdDate.MatchString(str) {
			return fmt.Errorf("%q is not an xs:date", str)
		}
	case "xs:dateTime":
		if !xsdDateTime.MatchString(str) {
			return fmt.Errorf("%q is not an xs:dateTime", str)
		}
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// checkJSON validates a JSON document as a value of typ.
func (s *xsdSchema) checkJSON(typ string, raw []byte) []string {
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return []string{"not JSON: " + err.Error()}
	}
	var problems []string
	s.check(typ, v, "", &problems)
	return problems
}
