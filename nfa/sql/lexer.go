package sql

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

type tokKind int

const (
	tEOF    tokKind = iota
	tIdent          // unquoted identifier or keyword; text as written
	tQIdent         // `quoted` or "quoted" identifier; text unescaped
	tString         // 'string'; text unescaped
	tNumber         // numeric literal; text as written
	tOp             // operator or punctuation; text is the operator
)

type token struct {
	kind tokKind
	text string
	pos  Pos
}

// describe names the token for error messages.
func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of query"
	case tIdent:
		if isReserved(t.text) {
			return "keyword " + strings.ToUpper(t.text)
		}
		return "'" + t.text + "'"
	case tQIdent:
		return "identifier " + quoteIdent(t.text)
	case tString:
		s := t.text
		if utf8.RuneCountInString(s) > 20 {
			s = string([]rune(s)[:20]) + "…"
		}
		return "string '" + strings.ReplaceAll(s, "'", "''") + "'"
	case tNumber:
		return "number " + t.text
	}
	return "'" + t.text + "'"
}

// is reports whether t is the unquoted keyword kw (case-insensitive).
func (t token) is(kw string) bool {
	return t.kind == tIdent && strings.EqualFold(t.text, kw)
}

// isOp reports whether t is the operator op.
func (t token) isOp(op string) bool { return t.kind == tOp && t.text == op }

type lexer struct {
	src       string
	off       int // byte offset of the next rune
	line, col int // position of the next rune
	toks      []token
}

// lex splits src into tokens, ending with a tEOF token.
func lex(src string) ([]token, *Error) {
	lx := &lexer{src: src, line: 1, col: 1}
	for {
		if err := lx.skipSpaceAndComments(); err != nil {
			return nil, err
		}
		start := Pos{lx.line, lx.col}
		if lx.off >= len(src) {
			lx.toks = append(lx.toks, token{kind: tEOF, pos: start})
			return lx.toks, nil
		}
		r, _ := lx.peek(0)
		switch {
		case r == '_' || unicode.IsLetter(r):
			b := lx.off
			for {
				r, _ := lx.peek(0)
				if r == '_' || r == '$' || unicode.IsLetter(r) || unicode.IsDigit(r) {
					lx.next()
					continue
				}
				break
			}
			lx.emit(tIdent, src[b:lx.off], start)
		case r >= '0' && r <= '9' || r == '.' && isDigitAt(src, lx.off+1):
			lx.number(start)
		case r == '`' || r == '"':
			text, err := lx.quoted(r, start)
			if err != nil {
				return nil, err
			}
			if text == "" {
				return nil, &Error{Pos: start, Msg: "empty quoted identifier"}
			}
			lx.emit(tQIdent, text, start)
		case r == '\'':
			text, err := lx.quoted('\'', start)
			if err != nil {
				return nil, err
			}
			lx.emit(tString, text, start)
		default:
			op := lx.operator()
			if op == "" {
				return nil, &Error{Pos: start, Msg: fmt.Sprintf("unexpected character %s", describeRune(r))}
			}
			lx.emit(tOp, op, start)
		}
	}
}

func describeRune(r rune) string {
	if r == utf8.RuneError {
		return "(invalid UTF-8)"
	}
	if unicode.IsPrint(r) {
		return fmt.Sprintf("'%c'", r)
	}
	return fmt.Sprintf("%U", r)
}

func isDigitAt(s string, i int) bool { return i < len(s) && s[i] >= '0' && s[i] <= '9' }

func (lx *lexer) emit(k tokKind, text string, p Pos) {
	lx.toks = append(lx.toks, token{kind: k, text: text, pos: p})
}

// peek returns the rune k runes ahead (k is 0 or 1) and its size.
func (lx *lexer) peek(k int) (rune, int) {
	off := lx.off
	for {
		if off >= len(lx.src) {
			return -1, 0
		}
		r, n := utf8.DecodeRuneInString(lx.src[off:])
		if k == 0 {
			return r, n
		}
		k--
		off += n
	}
}

func (lx *lexer) next() rune {
	r, n := lx.peek(0)
	if n == 0 {
		return -1
	}
	lx.off += n
	if r == '\n' {
		lx.line++
		lx.col = 1
	} else {
		lx.col++
	}
	return r
}

func (lx *lexer) skipSpaceAndComments() *Error {
	for lx.off < len(lx.src) {
		r, _ := lx.peek(0)
		r1, _ := lx.peek(1)
		switch {
		case unicode.IsSpace(r):
			lx.next()
		case r == '-' && r1 == '-':
			for lx.off < len(lx.src) {
				if r, _ := lx.peek(0); r == '\n' {
					break
				}
				lx.next()
			}
		case r == '/' && r1 == '*':
			start := Pos{lx.line, lx.col}
			lx.next()
			lx.next()
			for {
				if lx.off >= len(lx.src) {
					return &Error{Pos: start, Msg: "unterminated comment: '/*' without '*/'"}
				}
				if r, _ := lx.peek(0); r == '*' {
					if r1, _ := lx.peek(1); r1 == '/' {
						lx.next()
						lx.next()
						break
					}
				}
				lx.next()
			}
		default:
			return nil
		}
	}
	return nil
}

func (lx *lexer) number(start Pos) {
	b := lx.off
	digits := func() {
		for isDigitAt(lx.src, lx.off) {
			lx.next()
		}
	}
	digits()
	if lx.off < len(lx.src) && lx.src[lx.off] == '.' {
		lx.next()
		digits()
	}
	if lx.off < len(lx.src) && (lx.src[lx.off] == 'e' || lx.src[lx.off] == 'E') {
		j := lx.off + 1
		if j < len(lx.src) && (lx.src[j] == '+' || lx.src[j] == '-') {
			j++
		}
		if isDigitAt(lx.src, j) {
			for lx.off < j {
				lx.next()
			}
			digits()
		}
	}
	lx.emit(tNumber, lx.src[b:lx.off], start)
}

// quoted reads a literal or identifier delimited by q, where a doubled q
// stands for one q.
func (lx *lexer) quoted(q rune, start Pos) (string, *Error) {
	lx.next()
	var b strings.Builder
	for {
		if lx.off >= len(lx.src) {
			what := "string literal"
			if q != '\'' {
				what = "quoted identifier"
			}
			return "", &Error{Pos: start, Msg: fmt.Sprintf("unterminated %s: missing closing %c", what, q)}
		}
		r := lx.next()
		if r == q {
			if r1, _ := lx.peek(0); r1 == q {
				lx.next()
				b.WriteRune(q)
				continue
			}
			return b.String(), nil
		}
		b.WriteRune(r)
	}
}

var operators = []string{
	"<>", "<=", ">=", "!=", "||",
	"(", ")", ",", ".", ";", "*", "+", "-", "/", "%", "=", "<", ">", "|", "?", "{", "}", "^", "$", "[", "]", ":",
}

func (lx *lexer) operator() string {
	rest := lx.src[lx.off:]
	for _, op := range operators {
		if strings.HasPrefix(rest, op) {
			for range op {
				lx.next()
			}
			return op
		}
	}
	return ""
}
