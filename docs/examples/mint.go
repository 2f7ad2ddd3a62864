// Mints a tokengate api token with golang-jwt (Debian 12: apt-get install golang-go
// golang-github-golang-jwt-jwt-dev, which installs it for GOPATH builds: GOPATH=/usr/share/gocode
// GO111MODULE=off go run mint.go). With Go modules, import github.com/golang-jwt/jwt/v4 (or /v5) instead.
//
// Usage: mint SECRET_FILE USER_ID [KID]
// SECRET_FILE holds the HMAC secret as tokengate's hmac_file reads it (raw bytes, a trailing newline ignored).
package main

import (
	"bytes"
	"fmt"
	"os"
	"time"

	jwt "github.com/golang-jwt/jwt"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: mint SECRET_FILE USER_ID [KID]")
		os.Exit(64)
	}
	secret, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(66)
	}
	secret = bytes.TrimSuffix(secret, []byte("\n"))

	token := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub":      os.Args[2],
		"iat":      time.Now().Unix(),
		"api_only": true,
	})
	if len(os.Args) > 3 {
		token.Header["kid"] = os.Args[3]
	}
	signed, err := token.SignedString(secret)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(signed)
}
