# A minimal Rails application (Debian's ruby-railties and ruby-actionpack) that logs users in with Rails' own
# cookie store, for tokengate's session-cookie tests. It reads one JSON request on stdin and answers one JSON
# document on stdout; see scripts/frameworks/README.md for the protocol.
#
#   {"secret": "...", "kdf": "SHA1"|"SHA256", "expire_after": 3600 (optional),
#    "ops": [{"op": "login", "user": "42", "login_at": 1700000000, "api": false},
#            {"op": "read", "cookie": "..."}, {"op": "read_signed", "cookie": "..."}]}
#
# login answers {"cookie": <_app_session value>, "signed": <signed "login" cookie value>}; read and read_signed
# answer {"user": <the user id the application sees, or null>}.
require "json"
require "logger"
REQUEST = JSON.parse($stdin.read)

require "action_controller/railtie"

# Rails 7.0's key generator: PBKDF2-HMAC-SHA256 (`config.active_support.key_generator_hash_digest_class`), which
# 6.1's ActiveSupport::KeyGenerator cannot be told to use. Everything else (the cookie jar, MessageEncryptor,
# MessageVerifier, the metadata) stays Rails' own code.
class SHA256KeyGenerator
  def initialize(secret, iterations:)
    @secret = secret
    @iterations = iterations
  end

  def generate_key(salt, key_size = 64)
    OpenSSL::PKCS5.pbkdf2_hmac(@secret, salt, @iterations, key_size, OpenSSL::Digest::SHA256.new)
  end
end

class SessionTestApp < Rails::Application
  config.root = __dir__
  config.eager_load = false
  config.logger = Logger.new(nil)
  config.hosts.clear
  config.secret_key_base = REQUEST.fetch("secret")
  config.action_dispatch.cookies_serializer = :json
  config.action_dispatch.use_authenticated_cookie_encryption = true
  config.action_dispatch.use_cookies_with_metadata = true
  store = { key: "_app_session" }
  store[:expire_after] = REQUEST["expire_after"] if REQUEST["expire_after"]
  config.session_store :cookie_store, **store

  if REQUEST["kdf"] == "SHA256"
    def key_generator
      @sha256_key_generator ||= ActiveSupport::CachingKeyGenerator.new(
        SHA256KeyGenerator.new(secret_key_base, iterations: 1000)
      )
    end
  end
end

class SessionsController < ActionController::Base
  def create
    reset_session
    session[:user_id] = params[:user]
    session[:login_at] = params[:login_at].to_i
    session[:api_only] = true if params[:api] == "true"
    cookies.signed[:login] = { value: { "user_id" => params[:user], "login_at" => params[:login_at].to_i } }
    head :ok
  end

  def show
    render plain: session[:user_id].to_s
  end

  def show_signed
    value = cookies.signed[:login]
    render plain: value.is_a?(Hash) ? value["user_id"].to_s : ""
  end
end

SessionTestApp.initialize!
SessionTestApp.routes.draw do
  post "/login" => "sessions#create"
  get "/whoami" => "sessions#show"
  get "/whoami_signed" => "sessions#show_signed"
end

def cookie_values(headers)
  lines = headers["Set-Cookie"].to_s.split("\n")
  lines.each_with_object({}) do |line, values|
    name, value = line.split(";", 2).first.split("=", 2)
    values[name] = value
  end
end

mock = Rack::MockRequest.new(SessionTestApp)
results = REQUEST.fetch("ops").map do |op|
  case op.fetch("op")
  when "login"
    response = mock.post("/login", params: { user: op["user"], login_at: op["login_at"], api: op["api"].to_s })
    values = cookie_values(response.headers)
    { "cookie" => values["_app_session"], "signed" => values["login"] }
  when "read", "read_signed"
    path = op["op"] == "read" ? "/whoami" : "/whoami_signed"
    name = op["op"] == "read" ? "_app_session" : "login"
    response = mock.get(path, "HTTP_COOKIE" => "#{name}=#{op.fetch("cookie")}")
    { "user" => response.body.empty? ? nil : response.body }
  else
    raise "unknown op #{op["op"]}"
  end
end
puts JSON.generate({ "rails" => Rails.version, "results" => results })
