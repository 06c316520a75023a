package cache

import (
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocLinks: every doc link in the package's docs, such as
// [Cache.PutMatch], names something the package has. go/doc leaves a
// link to nothing as plain text in brackets, which pkg.go.dev shows as
// is.
func TestDocLinks(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, "github.com/nodepass/nodepass/cache")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{"package": p.Doc}
	for _, f := range p.Funcs {
		docs[f.Name] = f.Doc
	}
	for _, typ := range p.Types {
		docs[typ.Name] = typ.Doc
		for _, f := range append(typ.Funcs, typ.Methods...) {
			docs[typ.Name+"."+f.Name] = f.Doc
		}
	}
	unlinked := regexp.MustCompile(`\[\*?[A-Z]\w*(\.\w+)?\]`)
	parse := p.Parser()
	for name, text := range docs {
		for _, plain := range plainText(parse.Parse(text).Content) {
			for _, link := range unlinked.FindAllString(plain, -1) {
				t.Errorf("the doc of %s links %s, which the package does not have", name, link)
			}
		}
	}
}

// plainText returns the plain text of blocks, links left out.
func plainText(blocks []comment.Block) []string {
	var out []string
	var texts func([]comment.Text)
	texts = func(ts []comment.Text) {
		for _, x := range ts {
			switch x := x.(type) {
			case comment.Plain:
				out = append(out, string(x))
			case comment.Italic:
				out = append(out, string(x))
			}
		}
	}
	for _, b := range blocks {
		switch b := b.(type) {
		case *comment.Paragraph:
			texts(b.Text)
		case *comment.Heading:
			texts(b.Text)
		case *comment.List:
			for _, item := range b.Items {
				out = append(out, plainText(item.Content)...)
			}
		}
	}
	return out
}
