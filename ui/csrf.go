package ui

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
)

// csrfCookie holds the browser session's token, which every action's form carries too: a page
// of another site can make the browser send the cookie, but cannot read it to write the field.
const csrfCookie = "inbox_csrf"

// csrfToken returns the session's token, setting a new one in a cookie where the request has
// none.
func csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 32 {
		return c.Value
	}
	token := base64.RawURLEncoding.EncodeToString(randomBytes(32))
	http.SetCookie(w, &http.Cookie{
		Name: csrfCookie, Value: token, Path: base(r) + "/",
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	return token
}

// csrfValid reports whether a POST carries the session's token in its form.
func csrfValid(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || len(c.Value) < 32 {
		return false
	}
	return same(r.PostFormValue("csrf"), c.Value)
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand.Read)
	return b
}

// posted reads a POSTed form and checks its session token, and reports whether the action,
// what, may run; where not, it has answered the request.
func (h *handler) posted(w http.ResponseWriter, r *http.Request, what string) bool {
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return false
	}
	if !csrfValid(r) {
		h.fail(w, r, http.StatusForbidden, fmt.Errorf("the form carries no valid session token: reload the page, and %s from it", what))
		return false
	}
	return true
}
